package frontend

import (
	"context"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// OutcomeSink takes gateways' outcomes of picked requests: *server.Server
// (Server.OutcomesFor), for the front ends that report them (HTTP POST
// /v1/outcome, the ext_proc server). The error is a gRPC status
// (InvalidArgument naming the bad field). Safe for concurrent use.
type OutcomeSink interface {
	OutcomesFor(ctx context.Context, req *pb.ReportOutcomeRequest) (*pb.ReportOutcomeResponse, error)
}
