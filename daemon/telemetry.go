package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// serviceName is the default service.name of the router's telemetry;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it.
const serviceName = "prefixrouted"

// telemetry is one daemon's OpenTelemetry providers: a tracer provider that
// exports where the OTEL_* environment says (or a no-op one), and a meter
// provider read by the Prometheus exporter into a registry of its own, which
// /metrics serves. Each daemon has its own, so several can run in one
// process (tests); nothing is installed globally. Safe for concurrent use.
type telemetry struct {
	tracer     trace.TracerProvider
	sdkTracer  *sdktrace.TracerProvider // nil when tracing is off
	exporter   string                   // what the traces go to, for the start-up log
	meter      *sdkmetric.MeterProvider
	registry   *prometheus.Registry
	propagator propagation.TextMapPropagator
}

// tracingEnabled reports whether the OTEL_* environment asks for traces:
// OTEL_TRACES_EXPORTER set to anything but "none", or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set.
// OTEL_SDK_DISABLED=true turns tracing off whatever else is set.
func tracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); {
	case exp == "none":
		return false
	case exp != "":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// newTelemetry builds the providers. The span exporter comes from autoexport
// (OTLP over HTTP or gRPC per OTEL_EXPORTER_OTLP_PROTOCOL, or "console");
// the sampler from OTEL_TRACES_SAMPLER (default parent-based always-on);
// the resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func newTelemetry(ctx context.Context) (*telemetry, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	t := &telemetry{
		registry:   prometheus.NewRegistry(),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		tracer:     noop.NewTracerProvider(),
		exporter:   "off",
	}
	t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(t.registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.meter = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	if !tracingEnabled(os.Getenv) {
		return t, nil
	}
	spans, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		_ = t.meter.Shutdown(ctx) // nothing was recorded yet; the exporter's error is the one to return
		return nil, fmt.Errorf("trace exporter (OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_*): %w", err)
	}
	if autoexport.IsNoneSpanExporter(spans) {
		return t, nil
	}
	t.sdkTracer = sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithResource(res))
	t.tracer = t.sdkTracer
	t.exporter = exporterName(os.Getenv)
	return t, nil
}

// exporterName describes the configured span exporter for the logs.
func exporterName(getenv func(string) string) string {
	exp := getenv("OTEL_TRACES_EXPORTER")
	if exp == "" {
		exp = "otlp"
	}
	if exp != "otlp" {
		return exp
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto == "" {
		proto = "http/protobuf"
	}
	return "otlp " + proto
}

// metricsHandler serves the registry in the Prometheus text format (or
// OpenMetrics when the scraper asks for it).
func (t *telemetry) metricsHandler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Shutdown flushes and stops both providers: pending spans are exported, the
// meter provider stops reading. Bounded by ctx.
func (t *telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.sdkTracer != nil {
		if err := t.sdkTracer.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flushing traces: %w", err))
		}
	}
	if err := t.meter.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stopping metrics: %w", err))
	}
	return errors.Join(errs...)
}
