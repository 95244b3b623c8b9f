package server

import (
	"github.com/prefixroute/prefixroute/frontend"

	"context"
	"encoding/json"
	"net/http"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend/console"
)

// consoleBackend is the daemon as the console (frontend/console) sees it:
// the gRPC services' own implementations, PickFor, the observer's history
// ring, and the daemon's authorizer applied to the HTTP request as if it
// were a call of the gRPC method. Safe for concurrent use.
type consoleBackend struct{ d *Daemon }

// consoleHandler is the console's handler for httpHandler's mux.
func (d *Daemon) consoleHandler() http.Handler { return console.Handler(consoleBackend{d}) }

// ConsoleBackend is the daemon as the console sees it, for a test that
// builds its own console.Handler (with console.Unlimited, say).
func (d *Daemon) ConsoleBackend() console.Backend { return consoleBackend{d} }

func (b consoleBackend) Admin() pb.AdminServiceServer { return b.d.srv.Admin() }

func (b consoleBackend) Pick(ctx context.Context, req *pb.PickRequest) (*pb.PickResponse, error) {
	return b.d.srv.PickFor(ctx, req, frontend.PickMeta{Service: "prefixroute.console", Method: "Explain"})
}

func (b consoleBackend) History(pool string) (frontend.History, bool) {
	return b.d.srv.History(pool)
}

func (b consoleBackend) AuthEnabled() bool { return b.d.auth != nil }

func (b consoleBackend) Decisions(pool string) ([]json.RawMessage, bool) {
	return b.d.srv.RecentDecisions(pool)
}

// Authorize authorizes r as a call of fullMethod (frontend.AuthorizeHTTP).
func (b consoleBackend) Authorize(r *http.Request, fullMethod string) (context.Context, error) {
	return frontend.AuthorizeHTTP(b.d.auth, r, fullMethod)
}
