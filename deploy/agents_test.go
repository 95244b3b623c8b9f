package deploy

import (
	"fmt"
	"strconv"
	"strings"
)

// checkAgents: every prefixagent reports to a Service of these objects,
// on a port that reaches prefixrouted's gRPC listener, with TLS and a
// token exactly when that listener wants them; an InferencePool selects
// the agent's pod, its target port is the agent's --address port, and its
// endpoint picker serves the agent's --pool.
func checkAgents(objs []object, all []running) []string {
	var bad []string
	errf := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	services := map[string]object{}
	for _, o := range objs {
		if o.kind() == "Service" {
			services[o.name()] = o
		}
	}
	routerOf := func(svc object, port int) *running {
		for _, sp := range list(svc.m, "spec", "ports") {
			if get(sp, "port") != port {
				continue
			}
			tp := get(sp, "targetPort")
			if tp == nil {
				tp = port
			}
			for i, r := range all {
				if r.prog == "prefixrouted" && sameLabels(get(svc.m, "spec", "selector"), get(r.pod.spec, "metadata", "labels")) {
					if l := listenerOn(r.listen, containerPort(r.c, tp)); l != nil && l.flag == "listen" {
						return &all[i]
					}
				}
			}
		}
		return nil
	}
	for _, a := range all {
		if a.prog != "prefixagent" {
			continue
		}
		where := a.pod.where + ", container " + str(a.c, "name")
		host, p, _ := strings.Cut(a.flags["router"], ":")
		port, _ := strconv.Atoi(p)
		name, _, _ := strings.Cut(host, ".")
		svc, ok := services[name]
		if !ok {
			errf("%s: --router=%s: no Service %s in these manifests", where, a.flags["router"], name)
			continue
		}
		r := routerOf(svc, port)
		if r == nil {
			errf("%s: --router=%s: Service %s has no port %d reaching prefixrouted's --listen", where, a.flags["router"], name, port)
			continue
		}
		var l *listener
		for i := range r.listen {
			if r.listen[i].flag == "listen" {
				l = &r.listen[i]
			}
		}
		agentTLS := a.flags["tls"] == "true" || a.flags["tls-ca"] != "" || a.flags["tls-cert"] != "" || a.flags["tls-server-name"] != ""
		if l != nil && agentTLS != l.tls {
			errf("%s: TLS to the router %v, but %s's --listen serves TLS %v", where, agentTLS, r.pod.where, l.tls)
		}
		if (a.flags["token-file"] != "") != (r.flags["tokens-file"] != "") {
			errf("%s: --token-file %q, but %s's --tokens-file is %q", where, a.flags["token-file"], r.pod.where, r.flags["tokens-file"])
		}
		_, addrPort, _ := strings.Cut(a.flags["address"], ":")
		for _, o := range objs {
			if o.kind() != "InferencePool" || !sameLabels(get(o.m, "spec", "selector", "matchLabels"), get(a.pod.spec, "metadata", "labels")) {
				continue
			}
			if ref := str(o.m, "spec", "endpointPickerRef", "name"); ref != name {
				errf("%s: reports to Service %s, but InferencePool %s's endpoint picker is %s", where, name, o.name(), ref)
			}
			if pool := r.flags["extproc-default-pool"]; pool != a.flags["pool"] {
				errf("%s: --pool=%s, but the endpoint picker %s picks from pool %q (--extproc-default-pool)", where, a.flags["pool"], r.pod.where, pool)
			}
			found := false
			for _, tp := range list(o.m, "spec", "targetPorts") {
				found = found || fmt.Sprint(get(tp, "number")) == addrPort
			}
			if !found {
				errf("%s: --address=%s: port not among InferencePool %s's targetPorts", where, a.flags["address"], o.name())
			}
		}
	}
	agents := 0
	for _, a := range all {
		if a.prog == "prefixagent" {
			agents++
		}
	}
	for _, o := range objs {
		if o.kind() != "InferencePool" || agents == 0 { // a chart renders the picker, not the model servers
			continue
		}
		n := 0
		for _, a := range all {
			if a.prog == "prefixagent" && sameLabels(get(o.m, "spec", "selector", "matchLabels"), get(a.pod.spec, "metadata", "labels")) {
				n++
			}
		}
		if n == 0 {
			errf("%s: InferencePool %s selects no pod with a prefixagent: no instance would report to its picker", o.file, o.name())
		}
	}
	return bad
}
