package deploy

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEndpointPickerManifests: the EPP manifests (kubernetes/epp-*.yaml)
// agree with each other and with prefixrouted: the Deployment passes only
// real flags and serves --extproc-listen on its grpc-ext-proc port 9002,
// which the Service exposes and the InferencePool's endpointPickerRef
// names; the HTTPRoute sends traffic to the InferencePool; the
// NetworkPolicy covers the pods and opens 9002 and 50051.
func TestEndpointPickerManifests(t *testing.T) {
	flags := prefixroutedFlags(t)
	byKind := map[string][]object{}
	for _, o := range loadManifests(t) {
		if strings.HasPrefix(filepath.Base(o.file), "epp-") {
			byKind[o.kind()] = append(byKind[o.kind()], o)
		}
	}
	for kind, n := range map[string]int{"Deployment": 1, "Service": 1, "InferencePool": 1, "HTTPRoute": 1, "NetworkPolicy": 1, "PersistentVolumeClaim": 1} {
		if len(byKind[kind]) != n {
			t.Fatalf("want %d %s in epp-*.yaml, got %d", n, kind, len(byKind[kind]))
		}
	}
	dep, svc, pool, route, np := byKind["Deployment"][0], byKind["Service"][0], byKind["InferencePool"][0], byKind["HTTPRoute"][0], byKind["NetworkPolicy"][0]
	pod := get(dep.m, "spec", "template")
	if !sameLabels(get(svc.m, "spec", "selector"), get(pod, "metadata", "labels")) ||
		!sameLabels(get(np.m, "spec", "podSelector", "matchLabels"), get(pod, "metadata", "labels")) {
		t.Errorf("the Service or the NetworkPolicy does not select the EPP pods")
	}
	c := list(pod, "spec", "containers")[0]
	args := map[string]string{}
	for _, a := range list(c, "args") {
		s, _ := a.(string)
		name, value, _ := strings.Cut(strings.TrimPrefix(s, "--"), "=")
		if !strings.HasPrefix(s, "--") || !flags[name] {
			t.Errorf("arg %q is not a prefixrouted --flag=value", s)
		}
		args[name] = value
	}
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		n, _ := get(p, "containerPort").(int)
		ports[str(p, "name")] = n
	}
	if !strings.HasSuffix(args["extproc-listen"], ":9002") || ports["grpc-ext-proc"] != 9002 || !strings.HasSuffix(args["listen"], ":50051") || ports["grpc"] != 50051 {
		t.Errorf("--extproc-listen %q, --listen %q, ports %v: want 9002 (grpc-ext-proc) and 50051 (grpc)", args["extproc-listen"], args["listen"], ports)
	}
	svcPorts := map[string]int{}
	for _, sp := range list(svc.m, "spec", "ports") {
		if _, ok := ports[str(sp, "targetPort")]; !ok {
			t.Errorf("Service port %v targets no container port", sp)
		}
		n, _ := get(sp, "port").(int)
		svcPorts[str(sp, "name")] = n
	}
	ref := get(pool.m, "spec", "endpointPickerRef")
	if str(ref, "name") != svc.name() || get(ref, "port", "number") != svcPorts["grpc-ext-proc"] || svcPorts["grpc-ext-proc"] != 9002 {
		t.Errorf("InferencePool endpointPickerRef %v: want Service %s port 9002", ref, svc.name())
	}
	if str(pool.m, "apiVersion") != "inference.networking.k8s.io/v1" || len(list(pool.m, "spec", "targetPorts")) == 0 {
		t.Errorf("InferencePool %s: want inference.networking.k8s.io/v1 with targetPorts", pool.name())
	}
	found := false
	for _, r := range list(route.m, "spec", "rules") {
		for _, b := range list(r, "backendRefs") {
			found = found || str(b, "kind") == "InferencePool" && str(b, "name") == pool.name() && str(b, "group") == "inference.networking.k8s.io"
		}
	}
	if !found {
		t.Errorf("HTTPRoute %s has no backendRef to InferencePool %s", route.name(), pool.name())
	}
	open := map[int]bool{}
	for _, in := range list(np.m, "spec", "ingress") {
		for _, p := range list(in, "ports") {
			n, _ := get(p, "port").(int)
			open[n] = true
		}
	}
	if !open[9002] || !open[50051] {
		t.Errorf("NetworkPolicy opens %v; want 9002 and 50051", open)
	}
}
