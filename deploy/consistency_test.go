package deploy

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// pod is one pod template of the manifests (a Pod, or a workload's
// spec.template) with where it came from.
type pod struct {
	where string
	spec  any // the object with metadata and spec
}

// running is one container of a pod with what its flags say.
type running struct {
	pod    pod
	c      any
	prog   string
	flags  map[string]string
	listen []listener
}

func podsOf(objs []object) []pod {
	var out []pod
	for _, o := range objs {
		switch o.kind() {
		case "Pod":
			out = append(out, pod{o.file + ": Pod " + o.name(), o.m})
		case "Deployment", "StatefulSet", "DaemonSet":
			out = append(out, pod{o.file + ": " + o.kind() + " " + o.name(), get(o.m, "spec", "template")})
		}
	}
	return out
}

// checkConsistency checks objs (every object of one deployment: the
// shipped manifests, or a rendered chart) for probes, Services, memory and
// the agent's router against what each container listens on, as its flags
// say. It returns its findings, one line each.
func checkConsistency(t *testing.T, objs []object) []string {
	t.Helper()
	entrypoint := imageEntrypoint(t)
	var bad []string
	errf := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	var all []running
	for _, p := range podsOf(objs) {
		var here []running
		for _, c := range list(p.spec, "spec", "containers") {
			prog, flags, ls := listenersOf(t, p.spec, c, objs, entrypoint)
			here = append(here, running{p, c, prog, flags, ls})
		}
		all = append(all, here...)
		for _, r := range here {
			where := p.where + ", container " + str(r.c, "name")
			if r.prog == "" {
				continue // not ours to read
			}
			for _, cp := range list(r.c, "ports") {
				n, _ := get(cp, "containerPort").(int)
				if l := listenerOn(r.listen, n); l == nil || l.host == "127.0.0.1" || l.host == "localhost" {
					errf("%s: port %s (%d): %s listens on no non-loopback address there", where, str(cp, "name"), n, r.prog)
				}
			}
			for _, kind := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
				pr := get(r.c, kind)
				if pr == nil {
					continue
				}
				for _, e := range checkProbe(r.c, pr, r.listen) {
					errf("%s: %s: %s", where, kind, e)
				}
				// A probe may not depend on another process: the
				// agent's /healthz reads the router.
				for _, o := range here {
					if l := listenerOn(o.listen, containerPort(r.c, get(pr, "httpGet", "port"))); l != nil && o.c != nil && l.external[str(pr, "httpGet", "path")] && str(o.c, "name") == str(r.c, "name") {
						errf("%s: %s GET %s depends on the router; a router outage would %s", where, kind, str(pr, "httpGet", "path"), map[bool]string{true: "mark the pod NotReady", false: "restart the container"}[kind == "readinessProbe"])
					}
				}
			}
			if r.prog == "vllm" {
				pr := get(r.c, "readinessProbe")
				port := containerPort(r.c, get(pr, "httpGet", "port"))
				if l := listenerOn(r.listen, port); pr == nil || l == nil || l.program != "vllm" || str(pr, "httpGet", "path") != "/health" {
					errf("%s: the engine's readinessProbe must be GET /health on its own port %s", where, r.flags["port"])
				}
			}
			if r.prog == "prefixagent" {
				if get(r.c, "readinessProbe") != nil {
					errf("%s: a readinessProbe on the agent makes the engine's pod NotReady with it; use a livenessProbe on /livez", where)
				}
				if str(r.c, "livenessProbe", "httpGet", "path") != "/livez" {
					errf("%s: want livenessProbe GET /livez", where)
				}
			}
			if r.prog == "prefixrouted" || r.prog == "prefixagent" {
				checkMemory(r.c, where, errf)
			}
		}
	}
	// Services: each port targets a container port of the pods selected,
	// where a listener of the right protocol is.
	for _, o := range objs {
		if o.kind() != "Service" {
			continue
		}
		var sel []running
		for _, r := range all {
			if sameLabels(get(o.m, "spec", "selector"), get(r.pod.spec, "metadata", "labels")) {
				sel = append(sel, r)
			}
		}
		if len(sel) == 0 {
			errf("%s: Service %s selects no pod of these manifests", o.file, o.name())
			continue
		}
		for _, sp := range list(o.m, "spec", "ports") {
			where := fmt.Sprintf("%s: Service %s port %s", o.file, o.name(), str(sp, "name"))
			tp := get(sp, "targetPort")
			if tp == nil {
				tp = get(sp, "port")
			}
			for _, p := range podsSelected(sel) {
				l := serviceTarget(p, tp)
				if l == nil {
					errf("%s: targetPort %v is no port of %s where a container listens", where, tp, p[0].pod.where)
					continue
				}
				switch ap := str(sp, "appProtocol"); {
				case ap == "kubernetes.io/h2c" && l.tls:
					errf("%s: appProtocol %s (cleartext HTTP/2) on --%s, which serves TLS", where, ap, l.flag)
				case ap == "grpc" && !l.grpc:
					errf("%s: appProtocol grpc on --%s, which serves HTTP", where, l.flag)
				case (ap == "kubernetes.io/wss" || ap == "https") && !l.tls:
					errf("%s: appProtocol %s on --%s, which serves plaintext", where, ap, l.flag)
				}
			}
		}
	}
	bad = append(bad, checkAgents(objs, all)...)
	return bad
}

// checkProbe checks one probe against the container's listeners.
func checkProbe(c, pr any, ls []listener) []string {
	var bad []string
	switch {
	case get(pr, "grpc") != nil:
		n, _ := get(pr, "grpc", "port").(int)
		l := listenerOn(ls, n)
		switch {
		case l == nil:
			bad = append(bad, fmt.Sprintf("gRPC probe of port %d, where nothing listens", n))
		case !l.grpc:
			bad = append(bad, fmt.Sprintf("gRPC probe of port %d (--%s), which serves HTTP", n, l.flag))
		case l.tls:
			bad = append(bad, fmt.Sprintf("gRPC probe of port %d (--%s), which serves TLS: the kubelet's gRPC probe speaks plaintext only", n, l.flag))
		}
	case get(pr, "httpGet") != nil:
		p := get(pr, "httpGet", "port")
		n := containerPort(c, p)
		l := listenerOn(ls, n)
		path := str(pr, "httpGet", "path")
		https := str(pr, "httpGet", "scheme") == "HTTPS"
		switch {
		case l == nil:
			bad = append(bad, fmt.Sprintf("GET %s on port %v, where nothing listens", path, p))
		case l.grpc:
			bad = append(bad, fmt.Sprintf("GET %s on port %v (--%s), which serves gRPC", path, p, l.flag))
		case !l.paths[path]:
			bad = append(bad, fmt.Sprintf("GET %s on port %v (--%s), which does not serve that path", path, p, l.flag))
		case https != l.tls:
			bad = append(bad, fmt.Sprintf("GET %s on port %v: scheme HTTPS %v, but --%s serves TLS %v", path, p, https, l.flag, l.tls))
		}
	case get(pr, "tcpSocket") != nil:
		if listenerOn(ls, containerPort(c, get(pr, "tcpSocket", "port"))) == nil {
			bad = append(bad, "tcpSocket probe of a port where nothing listens")
		}
	default:
		bad = append(bad, "no grpc, httpGet or tcpSocket")
	}
	return bad
}

var quantity = regexp.MustCompile(`^([0-9]+)(Ki|Mi|Gi|KiB|MiB|GiB|B|)$`)

// bytesOf reads a Kubernetes memory quantity (1Gi) or a GOMEMLIMIT value
// (900MiB); -1 when it is neither.
func bytesOf(s string) int64 {
	m := quantity.FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return -1
	}
	return n << map[string]int{"Ki": 10, "KiB": 10, "Mi": 20, "MiB": 20, "Gi": 30, "GiB": 30}[m[2]]
}

// checkMemory: a Go container with a memory limit sets GOMEMLIMIT below it,
// so the collector works before the kernel kills.
func checkMemory(c any, where string, errf func(string, ...any)) {
	limit := fmt.Sprint(get(c, "resources", "limits", "memory"))
	if get(c, "resources", "limits", "memory") == nil {
		errf("%s: no memory limit", where)
		return
	}
	for _, e := range list(c, "env") {
		if str(e, "name") != "GOMEMLIMIT" {
			continue
		}
		v, l := bytesOf(str(e, "value")), bytesOf(limit)
		if v <= 0 || l <= 0 || v >= l {
			errf("%s: GOMEMLIMIT %q must be below the memory limit %s", where, str(e, "value"), limit)
		}
		return
	}
	errf("%s: memory limit %s without GOMEMLIMIT", where, limit)
}

// podsSelected groups containers by pod.
func podsSelected(rs []running) [][]running {
	var out [][]running
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1][0].pod.where == r.pod.where {
			out[n-1] = append(out[n-1], r)
		} else {
			out = append(out, []running{r})
		}
	}
	return out
}

// serviceTarget is the listener a Service's targetPort reaches in a pod
// (nil: none, or a container not ours to read).
func serviceTarget(p []running, tp any) *listener {
	for _, r := range p {
		if n := containerPort(r.c, tp); n != 0 {
			if l := listenerOn(r.listen, n); l != nil {
				return l
			}
			if r.prog == "" {
				return &listener{flag: "(" + str(r.c, "name") + ")", port: n}
			}
		}
	}
	return nil
}

// TestManifestsConsistent: over every shipped manifest, each probe reaches
// a listener of its container speaking the probe's protocol (plaintext
// gRPC with health, or HTTP on a path it serves, HTTPS exactly on TLS),
// each Service port targets a real listener with an appProtocol that fits
// it (h2c only on plaintext), no probe depends on the router, the engine's
// readiness is its own, every Go container sets GOMEMLIMIT below its memory
// limit, and every prefixagent reaches its router as the router expects.
func TestManifestsConsistent(t *testing.T) {
	for _, e := range checkConsistency(t, loadManifests(t)) {
		t.Error(e)
	}
}

// TestConsistencyFindsBreakage: each breakage of the shipped manifests
// that issue 28 found (or that a later edit could make) is reported.
func TestConsistencyFindsBreakage(t *testing.T) {
	for _, tc := range []struct{ file, old, new, want string }{
		{"kubernetes/epp-deployment.yaml", "httpGet: {path: /readyz, port: http}\n            periodSeconds: 2", "grpc: {port: 9002}\n            periodSeconds: 2", "which serves TLS: the kubelet's gRPC probe speaks plaintext only"},
		{"kubernetes/epp-deployment.yaml", "appProtocol: http2", "appProtocol: kubernetes.io/h2c", "(cleartext HTTP/2) on --extproc-listen, which serves TLS"},
		{"kubernetes/epp-deployment.yaml", "targetPort: grpc-ext-proc", "targetPort: ext-proc", "targetPort ext-proc is no port"},
		{"kubernetes/epp-deployment.yaml", "value: 920MiB", "value: 2GiB", `GOMEMLIMIT "2GiB" must be below the memory limit 1Gi`},
		{"kubernetes/prefixrouted-pvc.yaml", "path: /readyz, port: metrics, scheme: HTTPS", "path: /readyz, port: metrics", "scheme HTTPS false, but --metrics-listen serves TLS true"},
		{"kubernetes/prefixrouted-pvc.yaml", "path: /readyz, port: metrics", "path: /ready, port: metrics", "GET /ready on port metrics (--metrics-listen), which does not serve that path"},
		{"kubernetes/prefixagent-sidecar.yaml", "--router=prefixroute-epp:50051", "--router=prefixrouted.prefixroute.svc:50051", "TLS to the router false, but"},
		{"kubernetes/prefixagent-sidecar.yaml", "--router=prefixroute-epp:50051", "--router=prefixroute-epp:50052", "has no port 50052 reaching prefixrouted's --listen"},
		{"kubernetes/prefixagent-sidecar.yaml", "--router=prefixroute-epp:50051", "--router=router:50051", "no Service router"},
		{"kubernetes/prefixagent-sidecar.yaml", "--pool=llama", "--pool=meta-llama/Llama-3.1-8B-Instruct", `picks from pool "llama"`},
		{"kubernetes/prefixagent-sidecar.yaml", "    app: vllm-llama\n    deployment", "    app: llama-8b\n    deployment", "InferencePool llama selects no pod with a prefixagent"},
		{"kubernetes/prefixagent-sidecar.yaml", "--address=$(POD_IP):8000", "--address=$(POD_IP):8001", "port not among InferencePool llama's targetPorts"},
		{"kubernetes/prefixagent-sidecar.yaml", "        - --block-size=16\n        - --http-listen=0.0.0.0:9091\n", "        - --block-size=16\n        - --http-listen=0.0.0.0:9091\n        - --token-file=/t\n", `--token-file "/t", but`},
		{"kubernetes/prefixagent-sidecar.yaml", "      livenessProbe:\n        httpGet:\n          path: /livez", "      readinessProbe:\n        httpGet:\n          path: /healthz", "depends on the router; a router outage would mark the pod NotReady"},
		{"kubernetes/prefixagent-sidecar.yaml", "      readinessProbe:\n        httpGet: {path: /health, port: http}", "      readinessProbe:\n        httpGet: {path: /livez, port: 9091}", "the engine's readinessProbe must be GET /health on its own port 8000"},
	} {
		t.Run(tc.file+":"+tc.new, func(t *testing.T) {
			var objs []object
			found := false
			for _, o := range loadManifests(t) {
				if o.file != tc.file {
					objs = append(objs, o)
				}
			}
			b, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(tc.old)) {
				t.Fatalf("%s does not contain %q", tc.file, tc.old)
			}
			objs = append(objs, decodeObjects(t, tc.file, bytes.Replace(b, []byte(tc.old), []byte(tc.new), 1))...)
			got := checkConsistency(t, objs)
			for _, e := range got {
				found = found || strings.Contains(e, tc.want)
			}
			if !found {
				t.Errorf("want a finding containing %q, got %q", tc.want, got)
			}
		})
	}
}
