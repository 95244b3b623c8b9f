package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"strings"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/flowq"
	"github.com/prefixroute/prefixroute/internal/gateway"
)

// Limits of the console's endpoints.
const (
	// MaxBodyBytes bounds a POST body: 1 MiB, room for a 131072-token
	// prompt as token ids (the most pkg/prefixhash hashes).
	MaxBodyBytes = 1 << 20
	// MaxQueryBytes bounds one query value (a pool or deployment name):
	// 256 bytes, twice the daemon's default --max-name-bytes.
	MaxQueryBytes = 256
	// RequestsPerSecond and Burst are the console's token bucket, shared by
	// all its authenticated clients (all clients when authentication is
	// off): a page polls 1-2 endpoints a second. A request without a valid
	// identity is refused before it takes a token.
	RequestsPerSecond = 50
	Burst             = 100
	// MaxOverviewPools is how many pools the overview details (deployments,
	// instance states); the rest are listed by name and counts only.
	MaxOverviewPools = 64
	// HeaderName is the header every write must carry (any value): a
	// cross-site form cannot set it, and a cross-origin script cannot
	// without a CORS preflight the console never grants.
	HeaderName = "X-Prefixroute-Console"
)

// Backend is what the console needs of the router: *server.Server, whose
// methods run the gRPC services' own code. All methods are safe for
// concurrent use.
type Backend interface {
	// Admin is the AdminService implementation the gRPC server serves.
	Admin() pb.AdminServiceServer
	// PickFor decides req as PickService.Pick does, recorded as every
	// pick is (frontend.Picker.PickFor).
	PickFor(ctx context.Context, req *pb.PickRequest, meta frontend.PickMeta) (*pb.PickResponse, error)
	// History is the pool's ring of the last frontend.HistorySeconds;
	// false when the router does not track the pool (no pick, report or
	// change yet, or past its ring budget).
	History(pool string) (frontend.History, bool)
	// RecentDecisions are the decision log's latest lines of the pool,
	// newest first (its JSON lines, docs/operating.md "Decision log"); false when
	// the decision log is off.
	RecentDecisions(pool string) ([]json.RawMessage, bool)
	// FlowQueue is pool's waiting room (on_saturation: queue) with at most
	// perBand flows per band, and whether a pick of pool has waited since
	// the router started.
	FlowQueue(pool string, perBand int) (flowq.PoolQueue, bool)
}

//go:embed static
var static embed.FS

// console is the handler: the backend, the rate limiter and the routes.
type console struct {
	b   Backend
	a   frontend.Authorizer // nil: authentication off
	lim *rate.Limiter
	mux *http.ServeMux
	// refused, when set, is why /ui/api/ is not served: every endpoint
	// takes a bearer token, which must not cross the network in cleartext.
	refused string
}

// Option changes a Handler.
type Option func(*console)

// Unlimited turns the rate limit off, for a fuzz test that must reach the
// endpoints' own checks.
func Unlimited() Option { return func(c *console) { c.lim = rate.NewLimiter(rate.Inf, 0) } }

// Refused makes the console refuse its API (/ui/api/) with 403 and why,
// when why is set: the daemon's exposure rule forbids bearer tokens on
// its listener (cleartext off loopback). The page is still served.
func Refused(why string) Option { return func(c *console) { c.refused = why } }

// Handler serves the console of b under /ui/: the page and its assets,
// and the JSON endpoints under /ui/api/, each authorized by a as the gRPC
// method it calls (nil a: authentication off). Safe for concurrent use.
func Handler(b Backend, a frontend.Authorizer, opts ...Option) http.Handler {
	c := &console{b: b, a: a, lim: rate.NewLimiter(RequestsPerSecond, Burst), mux: http.NewServeMux()}
	for _, o := range opts {
		o(c)
	}
	root, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(root)
	c.mux.Handle("/ui/", http.StripPrefix("/ui/", assetsOnly(files)))
	c.mux.HandleFunc("GET /ui/api/pools", c.pools)
	c.mux.HandleFunc("GET /ui/api/pool", c.pool)
	c.mux.HandleFunc("GET /ui/api/migration", c.migration)
	c.mux.HandleFunc("GET /ui/api/decisions", c.decisions)
	c.mux.HandleFunc("GET /ui/api/capacity", c.capacity)
	c.mux.HandleFunc("POST /ui/api/weights", c.setWeights)
	c.mux.HandleFunc("POST /ui/api/ramp/start", c.startRamp)
	c.mux.HandleFunc("POST /ui/api/ramp/{op}", c.updateRamp)
	c.mux.HandleFunc("POST /ui/api/explain", c.explain)
	c.mux.HandleFunc("/ui/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no console endpoint %s %s", r.Method, r.URL.Path))
	})
	return c
}

// assets are the files of static/ the console serves; anything else under
// /ui/ is NotFound (no directory listing, no file server error pages).
var assets = map[string]bool{"": true, "index.html": true, "style.css": true,
	"app.js": true, "charts.js": true, "overview.js": true, "operate.js": true, "capacity.js": true, "main.js": true}

// assetsOnly serves the embedded files to GET and HEAD.
func assetsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "InvalidArgument", r.Method+" "+r.URL.Path+": the console's pages take GET")
		case !assets[r.URL.Path]:
			writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no console page /ui/%s", r.URL.Path))
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// ServeHTTP applies what every request gets: security headers, the
// loopback Host check when authentication is off, the cleartext refusal,
// authentication (gate), then the rate limit, and for writes the console
// header and a same-origin check.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if c.a == nil {
		// Without authentication the listener is on loopback; a Host that
		// is not is a DNS-rebinding page, not an operator.
		if err := frontend.CheckLoopbackHost(r); err != nil {
			writeError(w, http.StatusForbidden, "PermissionDenied", err.Error())
			return
		}
	}
	if c.refused != "" && strings.HasPrefix(r.URL.Path, "/ui/api/") {
		writeError(w, http.StatusForbidden, "PermissionDenied", c.refused)
		return
	}
	if err := c.gate(r); err != nil {
		writeStatus(w, err)
		return
	}
	if !c.lim.Allow() {
		h.Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "ResourceExhausted",
			fmt.Sprintf("console rate limit: %d requests/s (burst %d) for all clients together; retry in 1 s", RequestsPerSecond, Burst))
		return
	}
	if r.Method == http.MethodPost {
		if err := checkWrite(r); err != nil {
			writeError(w, http.StatusForbidden, "PermissionDenied", err.Error())
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	}
	c.mux.ServeHTTP(w, r)
}

// checkWrite refuses a POST that a cross-site page could have sent: it must
// carry HeaderName and a JSON content type, and an Origin (or
// Sec-Fetch-Site) that says same origin.
func checkWrite(r *http.Request) error {
	if r.Header.Get(HeaderName) == "" {
		return fmt.Errorf("writes need the %s header (the console page sends it); a form or a cross-site page cannot", HeaderName)
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		ct = r.Header.Get("Content-Type")
		return fmt.Errorf("Content-Type %q: writes take application/json", ct)
	}
	if err := frontend.SameOrigin(r); err != nil {
		return fmt.Errorf("writes: %w", err)
	}
	return nil
}

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeError(w http.ResponseWriter, httpStatus int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(apiError{Error: msg, Code: code}) // a client gone mid-answer: nothing left to tell it
}

// writeStatus answers err, a gRPC status from the backend (or any error,
// as Internal), with the HTTP status its code maps to.
func writeStatus(w http.ResponseWriter, err error) {
	st, _ := status.FromError(err)
	writeError(w, gateway.HTTPStatus(st.Code()), st.Code().String(), st.Message())
}

// writeJSON answers v with 200.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // a client gone mid-answer: nothing left to tell it
}

// badRequest is an input error the console found itself.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return badRequest{fmt.Sprintf(format, args...)} }

// fail answers an error of a handler: a badRequest as 400 (or 413 for a
// body over MaxBodyBytes), anything else as a gRPC status.
func fail(w http.ResponseWriter, err error) {
	var br badRequest
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "InvalidArgument",
			fmt.Sprintf("request body over %d bytes (the console's limit)", MaxBodyBytes))
	case errors.As(err, &br):
		writeError(w, http.StatusBadRequest, "InvalidArgument", br.msg)
	default:
		writeStatus(w, err)
	}
}

// query returns the query value name, checked against MaxQueryBytes; a
// required one must be set.
func query(r *http.Request, name string, required bool) (string, error) {
	vs := r.URL.Query()[name]
	if len(vs) > 1 {
		return "", badf("query %s is given %d times; give it once", name, len(vs))
	}
	v := ""
	if len(vs) == 1 {
		v = vs[0]
	}
	switch {
	case len(v) > MaxQueryBytes:
		return "", badf("query %s is %d bytes; the limit is %d", name, len(v), MaxQueryBytes)
	case required && v == "":
		return "", badf("query %s is required", name)
	}
	return v, nil
}

// decode reads a JSON body into v: one object, no unknown fields, no key
// twice in an object, UTF-8 only (strictJSON).
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return err
		}
		return badf("request body: %v", err)
	}
	if err := strictJSON(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badf("request body: %v", err)
	}
	if dec.More() {
		return badf("request body: one JSON object expected, found more after it")
	}
	return nil
}

// authorize authorizes r as a call of the gRPC method fullMethod
// (frontend.AuthorizeHTTP) and returns the context to call it with, or a
// gRPC status error.
func (c *console) authorize(r *http.Request, fullMethod string) (context.Context, error) {
	return frontend.AuthorizeHTTP(c.a, r, fullMethod)
}
