package deploy

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// object is one Kubernetes object of a manifest, with where it came from.
type object struct {
	file string
	m    map[string]any
}

func (o object) kind() string { return str(o.m, "kind") }
func (o object) name() string { return str(o.m, "metadata", "name") }

// get walks maps by key; nil when a key is missing.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any, path ...string) string { s, _ := get(v, path...).(string); return s }

func list(v any, path ...string) []any { l, _ := get(v, path...).([]any); return l }

// loadManifests parses every YAML file under deploy/ but envoy/, each
// document an object with apiVersion, kind and metadata.name.
func loadManifests(t *testing.T) []object {
	t.Helper()
	var out []object
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == "envoy" {
			return filepath.SkipDir // Envoy's config, not Kubernetes objects: envoy_test.go
		}
		if err == nil && d.IsDir() && path == "helm" {
			return filepath.SkipDir // templates, rendered and checked by helm_test.go
		}
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, decodeObjects(t, path, b)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeObjects parses the YAML documents of one file, each an object
// with apiVersion, kind and metadata.name.
func decodeObjects(t *testing.T, path string, b []byte) []object {
	t.Helper()
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for i := 1; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Errorf("%s, document %d: %v", path, i, err)
			break
		}
		if m == nil {
			continue
		}
		o := object{path, m}
		if str(m, "apiVersion") == "" || o.kind() == "" || o.name() == "" {
			t.Errorf("%s, document %d: want apiVersion, kind and metadata.name", path, i)
		}
		out = append(out, o)
	}
	return out
}

// prefixroutedFlags lists prefixrouted's flags from its -help output.
func prefixroutedFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "prefixrouted")
	gobin := "go" // go test puts its own GOROOT/bin first on PATH
	if out, err := exec.Command(gobin, "build", "-o", bin, "../cmd/prefixrouted").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "-help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["listen"] || !flags["config"] || !flags["data-dir"] {
		t.Fatalf("no flags read from prefixrouted -help:\n%s", out)
	}
	return flags
}

// TestKubernetes: the prefixrouted manifests agree with each other and
// with the binary: every Deployment variant probes /healthz and /readyz on
// its named metrics port (the read-only --metrics-listen), mounts the data dir and every volume it names, and
// passes only real flags (on its args and in the ConfigMap's --config
// file, whose paths lie in mounted volumes); the Service selects the pods
// and targets their ports; the ServiceMonitor selects the Service.
func TestKubernetes(t *testing.T) {
	objs := loadManifests(t)
	flags := prefixroutedFlags(t)
	byKind := map[string][]object{}
	for _, o := range objs {
		if strings.HasPrefix(filepath.Base(o.file), "prefixrouted-") {
			byKind[o.kind()] = append(byKind[o.kind()], o)
		}
	}
	if len(byKind["Deployment"]) != 2 || len(byKind["Service"]) != 1 || len(byKind["ServiceMonitor"]) != 1 ||
		len(byKind["ConfigMap"]) != 1 || len(byKind["PersistentVolumeClaim"]) != 1 {
		t.Fatalf("want 2 Deployments (PVC, NATS), a Service, a ServiceMonitor, a ConfigMap, a PVC; got %v", byKind)
	}
	cm := byKind["ConfigMap"][0]
	var config map[string]any
	if err := yaml.Unmarshal([]byte(str(cm.m, "data", "prefixrouted.yaml")), &config); err != nil || len(config) == 0 {
		t.Fatalf("ConfigMap %s: prefixrouted.yaml: %v", cm.name(), err)
	}
	for k := range config {
		if !flags[k] || k == "config" || k == "version" {
			t.Errorf("ConfigMap %s: key %q is not a prefixrouted flag a file may set", cm.name(), k)
		}
	}
	svc := byKind["Service"][0]
	for _, dep := range byKind["Deployment"] {
		checkDeployment(t, dep, svc, cm, config, flags, byKind["PersistentVolumeClaim"][0])
	}
	sm := byKind["ServiceMonitor"][0]
	if !sameLabels(get(sm.m, "spec", "selector", "matchLabels"), get(svc.m, "metadata", "labels")) {
		t.Errorf("ServiceMonitor %s does not select Service %s", sm.name(), svc.name())
	}
	for _, ep := range list(sm.m, "spec", "endpoints") {
		if str(ep, "path") != "/metrics" || str(ep, "port") != "metrics" || !hasPort(svc, str(ep, "port")) {
			t.Errorf("ServiceMonitor endpoint %v: want path /metrics on the Service's port metrics", ep)
		}
	}
}

func checkDeployment(t *testing.T, dep, svc, cm object, config map[string]any, flags map[string]bool, pvc object) {
	t.Helper()
	where := dep.file + ": Deployment " + dep.name()
	pod := get(dep.m, "spec", "template")
	if !sameLabels(get(svc.m, "spec", "selector"), get(pod, "metadata", "labels")) ||
		!sameLabels(get(dep.m, "spec", "selector", "matchLabels"), get(pod, "metadata", "labels")) {
		t.Errorf("%s: its pods are not selected by its selector and Service %s", where, svc.name())
	}
	containers := list(pod, "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("%s: want one container", where)
	}
	c := containers[0]
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		n, _ := get(p, "containerPort").(int)
		ports[str(p, "name")] = n
	}
	if ports["grpc"] != 50051 || ports["http"] != 9090 || ports["metrics"] != 9092 {
		t.Errorf("%s: ports %v: want grpc 50051, http 9090 and metrics 9092", where, ports)
	}
	for _, sp := range list(svc.m, "spec", "ports") {
		if _, ok := ports[str(sp, "targetPort")]; !ok {
			t.Errorf("%s: Service port %v targets no container port", where, sp)
		}
	}
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"} {
		if str(c, probe, "httpGet", "path") != path || str(c, probe, "httpGet", "port") != "metrics" {
			t.Errorf("%s: %s: want GET %s on port metrics (--metrics-listen)", where, probe, path)
		}
	}
	if get(pod, "spec", "securityContext", "runAsNonRoot") != true {
		t.Errorf("%s: want runAsNonRoot", where)
	}
	// Volumes: each mount names a volume; the data dir is one; the config
	// map and the PVC (when used) are the ones of these manifests.
	volumes := map[string]any{}
	for _, v := range list(pod, "spec", "volumes") {
		volumes[str(v, "name")] = v
	}
	mounts := map[string]string{} // path -> volume
	for _, m := range list(c, "volumeMounts") {
		if volumes[str(m, "name")] == nil {
			t.Errorf("%s: mount %v names no volume", where, m)
		}
		mounts[str(m, "mountPath")] = str(m, "name")
	}
	data := volumes[mounts["/var/lib/prefixroute"]]
	switch {
	case data == nil:
		t.Errorf("%s: nothing mounted at the data dir /var/lib/prefixroute", where)
	case get(data, "persistentVolumeClaim") != nil:
		if str(data, "persistentVolumeClaim", "claimName") != pvc.name() {
			t.Errorf("%s: the data volume claims %q, not PVC %s", where, str(data, "persistentVolumeClaim", "claimName"), pvc.name())
		}
		if str(dep.m, "spec", "strategy", "type") != "Recreate" || get(dep.m, "spec", "replicas") != 1 {
			t.Errorf("%s: one replica, strategy Recreate, with a ReadWriteOnce volume", where)
		}
	case get(data, "emptyDir") != nil:
		if !hasArg(c, "--nats") {
			t.Errorf("%s: an emptyDir data dir without --nats loses the weights at every restart", where)
		}
	default:
		t.Errorf("%s: the data dir is neither a PVC nor an emptyDir", where)
	}
	for _, v := range volumes {
		if name := str(v, "configMap", "name"); name != "" && name != cm.name() {
			t.Errorf("%s: ConfigMap %q is not the one of these manifests", where, name)
		}
	}
	inMount := func(path string) bool {
		for m := range mounts {
			if strings.HasPrefix(path, m+"/") {
				return true
			}
		}
		return false
	}
	// Args: real flags; --config points into a mount; the file's paths too.
	for _, a := range list(c, "args") {
		s, _ := a.(string)
		name, value, _ := strings.Cut(strings.TrimPrefix(s, "--"), "=")
		if !strings.HasPrefix(s, "--") || !flags[name] {
			t.Errorf("%s: arg %q is not a prefixrouted --flag=value", where, s)
		}
		if (name == "config" || strings.HasSuffix(name, "-creds")) && !inMount(value) {
			t.Errorf("%s: %s is in no mounted volume", where, s)
		}
	}
	if !hasArg(c, "--config") {
		t.Errorf("%s: no --config", where)
	}
	for _, k := range []string{"tokens-file", "tls-cert", "tls-key"} {
		if p, _ := config[k].(string); p == "" || !inMount(p) {
			t.Errorf("%s: the config's %s %q is in no mounted volume", where, k, p)
		}
	}
}

func hasArg(c any, flag string) bool {
	for _, a := range list(c, "args") {
		if s, _ := a.(string); s == flag || strings.HasPrefix(s, flag+"=") {
			return true
		}
	}
	return false
}

func hasPort(svc object, name string) bool {
	for _, p := range list(svc.m, "spec", "ports") {
		if str(p, "name") == name {
			return true
		}
	}
	return false
}

// sameLabels reports whether every label of sel is in labels (and sel is
// not empty).
func sameLabels(sel, labels any) bool {
	s, _ := sel.(map[string]any)
	l, _ := labels.(map[string]any)
	if len(s) == 0 {
		return false
	}
	for k, v := range s {
		if l[k] != v {
			return false
		}
	}
	return true
}
