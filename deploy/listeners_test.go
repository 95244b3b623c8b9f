package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/prefixroute/prefixroute/daemon"
)

// listener is one port a container serves, derived from its command line:
// what it speaks (gRPC with the health service, or HTTP and which paths),
// and whether over TLS.
type listener struct {
	flag     string // the flag that opens it, for messages
	host     string
	port     int
	grpc     bool
	tls      bool
	paths    map[string]bool // HTTP paths served
	external map[string]bool // paths whose answer depends on another process (the router)
	program  string
}

// imageEntrypoint is the Dockerfile's ENTRYPOINT: the command of a
// prefixroute container that sets none.
func imageEntrypoint(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`).FindSubmatch(b)
	var ep []string
	if m == nil || json.Unmarshal(m[1], &ep) != nil || len(ep) == 0 {
		t.Fatalf("../Dockerfile: no ENTRYPOINT [...] read")
	}
	return ep
}

// program names what a container runs: prefixrouted, prefixagent, vllm,
// or "" (unknown: not checked), and its full command line.
func program(c any, entrypoint []string) (string, []string) {
	var cmd []string
	for _, s := range list(c, "command") {
		cmd = append(cmd, fmt.Sprint(s))
	}
	image := str(c, "image")
	if len(cmd) == 0 && strings.HasPrefix(image, "prefixroute:") {
		cmd = entrypoint
	}
	for _, s := range list(c, "args") {
		cmd = append(cmd, fmt.Sprint(s))
	}
	switch {
	case len(cmd) > 0 && path.Base(cmd[0]) == "prefixrouted", len(cmd) > 0 && path.Base(cmd[0]) == "prefixagent":
		return path.Base(cmd[0]), cmd[1:]
	case strings.HasPrefix(image, "vllm/"):
		return "vllm", cmd
	}
	return "", cmd
}

// parseFlags reads --name=value and --name value pairs (bool flags given
// alone read as "true"); later wins, as with Go's flag package.
func parseFlags(args []string, into map[string]string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			value = "true"
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				value, i = args[i+1], i+1
			}
		}
		into[name] = value
	}
}

// configFile reads the --config file of a container from the ConfigMap
// mounted at its directory (nil when there is none).
func configFile(t *testing.T, pod any, c any, file string, objs []object) map[string]string {
	out := map[string]string{}
	dir, base := path.Split(file)
	for _, m := range list(c, "volumeMounts") {
		if strings.TrimSuffix(str(m, "mountPath"), "/") != strings.TrimSuffix(dir, "/") {
			continue
		}
		for _, v := range list(pod, "spec", "volumes") {
			if str(v, "name") != str(m, "name") || str(v, "configMap", "name") == "" {
				continue
			}
			for _, o := range objs {
				if o.kind() == "ConfigMap" && o.name() == str(v, "configMap", "name") {
					var kv map[string]any
					if err := yaml.Unmarshal([]byte(str(o.m, "data", base)), &kv); err != nil {
						t.Errorf("ConfigMap %s, %s: %v", o.name(), base, err)
					}
					for k, v := range kv {
						out[k] = fmt.Sprint(v)
					}
				}
			}
		}
	}
	return out
}

// listenersOf lists what container c of pod listens on, from its flags
// (defaults, then its --config file, then its command line).
func listenersOf(t *testing.T, pod, c any, objs []object, entrypoint []string) (string, map[string]string, []listener) {
	prog, args := program(c, entrypoint)
	f := map[string]string{}
	var ls []listener
	add := func(flag, addr string, grpc, tls bool, paths []string, external ...string) {
		if addr == "" || addr == "off" {
			return
		}
		host, p, _ := strings.Cut(addr, ":")
		if i := strings.LastIndex(addr, ":"); i >= 0 {
			host, p = addr[:i], addr[i+1:]
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Errorf("container %s: --%s=%s: no port", str(c, "name"), flag, addr)
			return
		}
		l := listener{flag: flag, host: host, port: n, grpc: grpc, tls: tls, paths: map[string]bool{}, external: map[string]bool{}, program: prog}
		for _, s := range paths {
			l.paths[s] = true
		}
		for _, s := range external {
			l.external[s] = true
		}
		ls = append(ls, l)
	}
	switch prog {
	case "prefixrouted":
		f["listen"], f["http-listen"], f["metrics-listen"], f["extproc-tls"] = daemon.DefaultListen, daemon.DefaultHTTPListen, daemon.DefaultMetricsListen, "daemon"
		cl := map[string]string{}
		parseFlags(args, cl)
		if cl["config"] != "" {
			for k, v := range configFile(t, pod, c, cl["config"], objs) {
				f[k] = v
			}
		}
		for k, v := range cl {
			f[k] = v
		}
		tls := f["tls-cert"] != ""
		probes := []string{"/healthz", "/readyz", "/metrics"}
		add("listen", f["listen"], true, tls, nil)
		add("http-listen", f["http-listen"], false, tls, append(probes, "/ui/", "/v1/pick", "/v1/route"))
		add("metrics-listen", f["metrics-listen"], false, tls, probes)
		extTLS := map[string]bool{"daemon": tls, "": tls, "plaintext": false, "self-signed": true}
		add("extproc-listen", f["extproc-listen"], true, extTLS[f["extproc-tls"]], nil)
	case "prefixagent":
		f["http-listen"] = "127.0.0.1:9091"
		parseFlags(args, f)
		// /healthz answers 503 while the router is unreachable; /livez
		// only says the agent's process and loops run.
		add("http-listen", f["http-listen"], false, false, []string{"/metrics", "/healthz", "/livez"}, "/healthz")
	case "vllm":
		f["host"], f["port"] = "0.0.0.0", "8000"
		parseFlags(args, f)
		add("port", f["host"]+":"+f["port"], false, false, []string{"/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions"})
	}
	return prog, f, ls
}

// containerPort resolves a probe's or Service's port (a number or a
// container port's name) to a number; 0 when it names no port.
func containerPort(c any, port any) int {
	switch p := port.(type) {
	case int:
		return p
	case string:
		for _, cp := range list(c, "ports") {
			if str(cp, "name") == p {
				n, _ := get(cp, "containerPort").(int)
				return n
			}
		}
	}
	return 0
}

func listenerOn(ls []listener, port int) *listener {
	for i := range ls {
		if ls[i].port == port {
			return &ls[i]
		}
	}
	return nil
}
