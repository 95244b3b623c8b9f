package server

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/internal/buildinfo"
)

// processStart is when this process started (package initialisation: before
// main runs). GetServerInfo reports it.
var processStart = time.Now()

// serverInfo is GetServerInfo's answer for this binary.
func serverInfo() *pb.GetServerInfoResponse {
	in := buildinfo.Read()
	return &pb.GetServerInfoResponse{
		Version:   in.Version,
		Revision:  in.Revision,
		Dirty:     in.Dirty,
		GoVersion: in.GoVersion,
		StartTime: timestamppb.New(processStart),
	}
}

// GetServerInfo returns the router's build and start time. It reads
// nothing but the binary's build information, so it answers whatever the
// state of the store or the cluster. Authorization: the operator-read role
// (an AdminService Get method).
func (as *adminService) GetServerInfo(context.Context, *pb.GetServerInfoRequest) (*pb.GetServerInfoResponse, error) {
	return serverInfo(), nil
}

// registerBuildInfo exports prefixroute_build_info{version,revision}: a
// gauge that is always 1, whose labels say which build runs (join it on
// instance to label other series by version).
func registerBuildInfo(m metric.Meter) error {
	in := buildinfo.Read()
	attrs := metric.WithAttributes(attribute.String("version", in.Version), attribute.String("revision", in.ShortRevision()),
		attribute.Bool("dirty", in.Dirty), attribute.String("go_version", in.GoVersion))
	_, err := m.Int64ObservableGauge("prefixroute_build_info",
		metric.WithDescription("Always 1; its labels are the running build: version, VCS revision, dirty flag, Go version."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, attrs)
			return nil
		}))
	return err
}
