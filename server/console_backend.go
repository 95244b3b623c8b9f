package server

import (
	"github.com/prefixroute/prefixroute/frontend"

	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/console"
)

// consoleBackend is the daemon as the console (server/console) sees it:
// the gRPC services' own implementations, PickFor, the observer's history
// ring, and the daemon's authorizer applied to the HTTP request as if it
// were a call of the gRPC method. Safe for concurrent use.
type consoleBackend struct{ d *Daemon }

// consoleHandler is the console's handler for httpHandler's mux.
func (d *Daemon) consoleHandler() http.Handler { return console.Handler(consoleBackend{d}) }

// ConsoleBackend is the daemon as the console sees it, for a test that
// builds its own console.Handler (with console.Unlimited, say).
func (d *Daemon) ConsoleBackend() console.Backend { return consoleBackend{d} }

func (b consoleBackend) Admin() pb.AdminServiceServer { return &adminService{s: b.d.srv} }

func (b consoleBackend) Pick(ctx context.Context, req *pb.PickRequest) (*pb.PickResponse, error) {
	return b.d.srv.PickFor(ctx, req, frontend.PickMeta{Service: "prefixroute.console", Method: "Explain"})
}

func (b consoleBackend) History(pool string) (frontend.History, bool) {
	return b.d.srv.obs.history(pool, b.d.srv.opts.Now())
}

func (b consoleBackend) AuthEnabled() bool { return b.d.auth != nil }

func (b consoleBackend) Decisions(pool string) ([]json.RawMessage, bool) {
	if b.d.dlog == nil {
		return nil, false
	}
	return b.d.dlog.recent.of(pool), true
}

// Authorize gives the request what a gRPC call carries: the peer (its
// address for the audit log, its verified client certificate) and the
// Authorization header as metadata; the authorizer then decides as for a
// call of fullMethod.
func (b consoleBackend) Authorize(r *http.Request, fullMethod string) (context.Context, error) {
	p := &peer.Peer{Addr: remoteAddr(r.RemoteAddr)}
	if r.TLS != nil {
		p.AuthInfo = credentials.TLSInfo{State: *r.TLS}
	}
	ctx := peer.NewContext(r.Context(), p)
	if b.d.auth == nil {
		return ctx, nil
	}
	if vs := r.Header.Values("Authorization"); len(vs) > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.MD{"authorization": vs})
	}
	return b.d.auth.Authorize(ctx, fullMethod)
}

func remoteAddr(s string) net.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return &net.TCPAddr{}
	}
	return net.TCPAddrFromAddrPort(ap)
}
