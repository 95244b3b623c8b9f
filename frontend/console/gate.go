package console

import (
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// writeMethods are the gRPC methods the console's writes call, by path.
var writeMethods = map[string]string{
	"/ui/api/weights":     pb.AdminService_SetWeights_FullMethodName,
	"/ui/api/ramp/start":  pb.AdminService_StartRamp_FullMethodName,
	"/ui/api/ramp/pause":  pb.AdminService_PauseRamp_FullMethodName,
	"/ui/api/ramp/resume": pb.AdminService_ResumeRamp_FullMethodName,
	"/ui/api/ramp/abort":  pb.AdminService_AbortRamp_FullMethodName,
	"/ui/api/explain":     pb.PickService_Pick_FullMethodName,
}

// gate authenticates a request of the API (/ui/api/) before it costs
// anything else: before the shared rate limit (so that tokenless traffic
// cannot use up the operators' share) and before its body is read or
// parsed. A write is authorized as the gRPC method it calls, so a caller
// of the wrong role gets 403 before sending its body; a read only needs
// an identity here (Unauthenticated), its handler authorizes it as its
// method. nil when authentication is off or the request is not the API's.
func (c *console) gate(r *http.Request) error {
	if c.a == nil || !strings.HasPrefix(r.URL.Path, "/ui/api/") {
		return nil
	}
	method, write := writeMethods[r.URL.Path]
	write = write && r.Method == http.MethodPost
	if !write {
		method = pb.AdminService_ListPools_FullMethodName
	}
	_, err := c.authorize(r, method)
	if err == nil || (!write && status.Code(err) != codes.Unauthenticated) {
		return nil
	}
	return err
}
