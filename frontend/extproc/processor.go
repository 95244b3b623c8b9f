package extproc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/openai"
)

// ServiceName is the gRPC service the Processor serves, and the name the
// health service answers SERVING for (with "").
var ServiceName = extprocv3.ExternalProcessor_ServiceDesc.ServiceName

// Wire names of the GIE endpoint picker protocol.
const (
	// MetadataNamespace is the dynamic-metadata namespace of the decision
	// and of the served endpoint.
	MetadataNamespace = "envoy.lb"
	// SubsetNamespace and SubsetKey hold the gateway's subset hint.
	SubsetNamespace = "envoy.lb.subset_hint"
	SubsetKey       = "x-gateway-destination-endpoint-subset"
	// ServedKey is the endpoint that served the request, on the response
	// path.
	ServedKey = "x-gateway-destination-endpoint-served"
	// BodyChunkBytes is the largest body chunk the Processor streams back
	// in FULL_DUPLEX_STREAMED mode: 62,000 bytes, as GIE's reference EPP
	// (under Envoy's 64 KiB per-message buffer).
	BodyChunkBytes = 62000
	// DefaultFallbacks is --extproc-fallbacks' default.
	DefaultFallbacks = 2
)

// Options configure a Processor.
type Options struct {
	// Gateway says how a request names its pool (internal/gateway).
	Gateway gateway.Config
	// Fallbacks is how many fallback endpoints follow the chosen one, by
	// joint probability (0: none; the pick then asks for AUDIT_LEVEL_CHOSEN
	// only). --extproc-fallbacks, default DefaultFallbacks.
	Fallbacks int
	// DecisionHeader, when set, names a request header that carries the
	// chosen deployment and its probability to the model server:
	// "deployment=blue; probability=0.734".
	DecisionHeader string
	// DefaultBodyMode is the request and response body mode assumed when
	// the gateway does not send protocol_config: FULL_DUPLEX_STREAMED
	// unless set (0 is NONE, which is not a useful default and means
	// FULL_DUPLEX_STREAMED here).
	DefaultBodyMode procmode.ProcessingMode_BodySendMode
	// Logger receives the served-endpoint mismatches and protocol errors;
	// nil means slog.Default().
	Logger *slog.Logger
	// Meter makes the processor's metrics; nil means none.
	Meter metric.Meter
	// Tracer makes one span per pick, a child of the HTTP request's
	// traceparent (else of the Process stream's span) on which PickFor
	// records the decision as for a gRPC Pick; nil means none.
	Tracer trace.TracerProvider
}

// Processor is the ExternalProcessor server. Safe for concurrent use.
type Processor struct {
	extprocv3.UnimplementedExternalProcessorServer
	picker    frontend.Picker
	mapper    *gateway.Mapper
	fallbacks int
	decHeader string
	mode      procmode.ProcessingMode_BodySendMode
	log       *slog.Logger
	met       *metrics
	tracer    trace.Tracer
}

// New returns a Processor picking through p.
func New(p frontend.Picker, opts Options) (*Processor, error) {
	if opts.Fallbacks < 0 {
		return nil, fmt.Errorf("extproc: fallbacks is %d; want >= 0", opts.Fallbacks)
	}
	m, err := gateway.NewMapper(opts.Gateway, p.BlockSize)
	if err != nil {
		return nil, err
	}
	switch opts.DefaultBodyMode {
	case procmode.ProcessingMode_NONE:
		opts.DefaultBodyMode = procmode.ProcessingMode_FULL_DUPLEX_STREAMED
	case procmode.ProcessingMode_FULL_DUPLEX_STREAMED, procmode.ProcessingMode_BUFFERED, procmode.ProcessingMode_BUFFERED_PARTIAL:
	default:
		return nil, fmt.Errorf("extproc: default body mode %v is not FULL_DUPLEX_STREAMED or BUFFERED", opts.DefaultBodyMode)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Meter == nil {
		opts.Meter = noop.NewMeterProvider().Meter("")
	}
	if opts.Tracer == nil {
		opts.Tracer = tracenoop.NewTracerProvider()
	}
	met, err := newMetrics(opts.Meter)
	if err != nil {
		return nil, fmt.Errorf("extproc: metrics: %w", err)
	}
	return &Processor{picker: p, mapper: m, fallbacks: opts.Fallbacks, decHeader: opts.DecisionHeader,
		mode: opts.DefaultBodyMode, log: opts.Logger.With("component", "extproc"), met: met,
		tracer: opts.Tracer.Tracer("github.com/prefixroute/prefixroute/frontend/extproc")}, nil
}

// FrontEnd is the daemon's front end serving a Processor built with opts
// on listen (the daemon configuration's FrontEnds). The pool's
// MaxPrefixBlocks default to the daemon's limit when opts leave them 0.
func FrontEnd(listen string, tls frontend.TLSMode, opts Options) frontend.GRPC {
	maxMsg := opts.Gateway.MaxBodyBytes
	if maxMsg <= 0 {
		maxMsg = openai.DefaultMaxBodyBytes
	}
	return frontend.GRPC{Name: "extproc", Listen: listen, TLS: tls, MaxRecvMsgBytes: maxMsg + 64<<10,
		Register: func(gs grpc.ServiceRegistrar, deps frontend.Deps) ([]string, error) {
			o := opts
			o.Meter, o.Logger, o.Tracer = deps.Meter, deps.Logger, deps.Tracer
			if o.Gateway.MaxPrefixBlocks == 0 {
				o.Gateway.MaxPrefixBlocks = deps.MaxPrefixBlocks
			}
			p, err := New(deps.Picker, o)
			if err != nil {
				return nil, err
			}
			extprocv3.RegisterExternalProcessorServer(gs, p)
			return []string{ServiceName}, nil
		}}
}

// Process serves one HTTP request's stream.
func (p *Processor) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	st := newStream(p, srv)
	defer st.releaseBody()      // however the stream ends: the body's bytes go back to the budget
	defer st.reportOutcome(nil) // an outcome still pending (no body came)
	for {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		done, err := st.handle(req)
		if err != nil || done {
			return err
		}
	}
}
