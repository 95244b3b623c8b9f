package httproute

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/openai"
)

// Paths of the HTTP Pick front ends.
const (
	PathPick  = "/v1/pick"
	PathRoute = "/v1/route"
)

// Options configure a Handler.
type Options struct {
	// Gateway maps a /v1/route request (an OpenAI body) to a Pick: its
	// pool, prefix hashes and prompt length, and the body limit
	// (prefixrouted's --extproc-* flags, shared with the ext_proc front
	// end).
	Gateway gateway.Config
	// MaxPrefixBlocks is the default of Gateway.MaxPrefixBlocks when it
	// is 0: the daemon's --max-prefix-blocks.
	MaxPrefixBlocks int
	// MaxPickBytes bounds a /v1/pick body: the gRPC listener's message
	// limit (--max-message-bytes, 4 MiB). Required.
	MaxPickBytes int
	// HTTP is the listener's authentication, tracing and logging, for
	// frontend.Wrap.
	HTTP frontend.HTTP
}

// Handler serves POST /v1/pick, /v1/route and /v1/outcome. Safe for
// concurrent use.
type Handler struct {
	p            frontend.Picker
	m            *gateway.Mapper // /v1/route's mapping
	maxPickBytes int
	pick, route  http.Handler // under frontend.Wrap
	outcome      http.Handler // POST /v1/outcome under frontend.Wrap; nil without an OutcomeSink
}

// New returns the front ends picking through p.
func New(p frontend.Picker, opts Options) (*Handler, error) {
	if opts.MaxPickBytes <= 0 {
		return nil, fmt.Errorf("httproute: MaxPickBytes is %d; want > 0", opts.MaxPickBytes)
	}
	gc := opts.Gateway
	if gc.MaxPrefixBlocks == 0 {
		gc.MaxPrefixBlocks = opts.MaxPrefixBlocks
	}
	m, err := gateway.NewMapper(gc, p.BlockSize)
	if err != nil {
		return nil, err
	}
	h := &Handler{p: p, m: m, maxPickBytes: opts.MaxPickBytes}
	h.pick = frontend.Wrap(opts.HTTP, frontend.Route{Path: PathPick, FullMethod: pb.PickService_Pick_FullMethodName, Serve: h.servePick})
	h.route = frontend.Wrap(opts.HTTP, frontend.Route{Path: PathRoute, FullMethod: pb.PickService_Pick_FullMethodName,
		Serve: h.serveRoute, Denied: denied})
	h.outcome = h.outcomeRoute(p, opts.HTTP)
	return h, nil
}

// Register adds the endpoints to mux: /v1/pick, /v1/route and, when the
// picker is also a frontend.OutcomeSink (*server.Server is), /v1/outcome.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle("POST "+PathPick, h.pick)
	mux.Handle("POST "+PathRoute, h.route)
	if h.outcome != nil {
		mux.Handle("POST "+PathOutcome, h.outcome)
	}
}

// servePick answers one authorized /v1/pick and returns the HTTP status it
// wrote.
func (h *Handler) servePick(ctx context.Context, w http.ResponseWriter, r *http.Request, meta frontend.PickMeta) int {
	body, err := readBody(w, r, h.maxPickBytes)
	if err != nil {
		return frontend.WriteStatus(w, bodyStatus(err))
	}
	req := &pb.PickRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		return frontend.WriteStatus(w, status.Errorf(codes.InvalidArgument, "body is not a PickRequest in protobuf JSON: %v", err))
	}
	resp, err := h.p.PickFor(ctx, req, meta)
	if err != nil {
		return frontend.WriteStatus(w, err)
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		return frontend.WriteStatus(w, status.Errorf(codes.Internal, "encoding the PickResponse: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	return http.StatusOK
}

// readBody reads a request body of at most limit bytes. The error wraps
// openai.ErrBodyTooLarge, naming the limit, or openai.ErrBadBody for a
// body that could not be read.
func readBody(w http.ResponseWriter, r *http.Request, limit int) ([]byte, error) {
	if r.ContentLength > int64(limit) {
		return nil, fmt.Errorf("%w: %d bytes; the limit is %d bytes", openai.ErrBodyTooLarge, r.ContentLength, limit)
	}
	// Sized by Content-Length when the client sent one (io.ReadAll would
	// grow from 512 bytes, copying a 16 KiB prompt five times).
	buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, int64(limit)))
	b := buf.Bytes()
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, fmt.Errorf("%w: over the limit of %d bytes", openai.ErrBodyTooLarge, limit)
	case err != nil:
		return nil, fmt.Errorf("%w: reading it: %v", openai.ErrBadBody, err)
	}
	return b, nil
}

// bodyStatus is readBody's error as /v1/pick answers it: ResourceExhausted
// with 413 for a body over the limit, else InvalidArgument.
func bodyStatus(err error) error {
	if errors.Is(err, openai.ErrBodyTooLarge) {
		return &frontend.StatusError{Code: http.StatusRequestEntityTooLarge, Status: status.New(codes.ResourceExhausted, err.Error())}
	}
	return status.Error(codes.InvalidArgument, err.Error())
}
