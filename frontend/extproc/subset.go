package extproc

import (
	"fmt"
	"net"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// readSubset reads the subset hint of the request headers' message: a list
// of strings (a string of comma-separated entries is accepted too);
// entries that are not strings are ignored.
func (s *stream) readSubset(req *extprocv3.ProcessingRequest) {
	v, ok := req.GetMetadataContext().GetFilterMetadata()[SubsetNamespace].GetFields()[SubsetKey]
	if !ok {
		return
	}
	s.hasHint = true
	add := func(e string) {
		for _, part := range strings.Split(e, ",") {
			if part = strings.TrimSpace(part); part != "" {
				s.subset = append(s.subset, part)
			}
		}
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		add(k.StringValue)
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if sv, ok := e.GetKind().(*structpb.Value_StringValue); ok {
				add(sv.StringValue)
			}
		}
	}
}

// excludeOutsideSubset adds the pool's instances that match no subset
// entry to req.ExcludeInstances, or returns the answer when that cannot
// be done: an empty hint, no instance in it, or more exclusions than a
// pick may carry.
func (s *stream) excludeOutsideSubset(req *pb.PickRequest) *gateway.Error {
	if len(s.subset) == 0 {
		return &gateway.Error{Status: 503, Reason: reasonEmptySubset, Message: "the gateway's subset hint (" + SubsetNamespace + "/" + SubsetKey + ") lists no endpoint"}
	}
	eps, err := s.p.picker.Endpoints(req.Pool, nil)
	if err != nil {
		return gateway.ErrorFor(err)
	}
	in := 0
	for _, ep := range eps {
		if inSubset(ep.Address, s.subset) {
			in++
			continue
		}
		req.ExcludeInstances = append(req.ExcludeInstances, ep.Instance)
	}
	if in == 0 {
		return &gateway.Error{Status: 503, Reason: reasonNoInstanceInSubset,
			Message: fmt.Sprintf("none of pool %q's %d instances is in the gateway's subset hint of %d endpoints", req.Pool, len(eps), len(s.subset))}
	}
	if max := s.p.picker.MaxExcludes(); len(req.ExcludeInstances) > max {
		return &gateway.Error{Status: 500, Reason: reasonSubsetExcludeLimit,
			Message: fmt.Sprintf("the gateway's subset hint leaves %d of pool %q's %d instances to exclude; a pick may exclude at most %d", len(req.ExcludeInstances), req.Pool, len(eps), max)}
	}
	return nil
}

// inSubset reports whether addr ("host:port") matches an entry: the same
// host and port, or the same host for an entry without a port. IPv6 hosts
// compare as IPs ("[::1]:80" matches "::1").
func inSubset(addr string, subset []string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, ""
	}
	for _, e := range subset {
		eh, ep, err := net.SplitHostPort(e)
		if err != nil {
			eh, ep = strings.Trim(e, "[]"), ""
		}
		if !sameHost(host, eh) {
			continue
		}
		if ep == "" || ep == port {
			return true
		}
	}
	return false
}

func sameHost(a, b string) bool {
	if a == b {
		return true
	}
	ia, ib := net.ParseIP(a), net.ParseIP(b)
	return ia != nil && ib != nil && ia.Equal(ib)
}
