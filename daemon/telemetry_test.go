package daemon

import (
	"context"
	"testing"
	"time"
)

// TestTracingEnabled pins when the OTEL_* environment turns tracing on.
func TestTracingEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false},
	} {
		if got := tracingEnabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("tracingEnabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// TestNewTelemetryFollowsEnvironment builds the providers under a few
// environments and checks which span exporter each got.
func TestNewTelemetryFollowsEnvironment(t *testing.T) {
	for _, c := range []struct {
		env      map[string]string
		exporter string
	}{
		{map[string]string{}, "off"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none"}, "off"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "console"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, "otlp http/protobuf"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp grpc"},
	} {
		for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
			"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED"} {
			t.Setenv(k, c.env[k])
		}
		tel, err := newTelemetry(context.Background())
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if tel.exporter != c.exporter || (tel.sdkTracer != nil) != (c.exporter != "off") {
			t.Errorf("%v: exporter %q (sdk provider %v), want %q", c.env, tel.exporter, tel.sdkTracer != nil, c.exporter)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := tel.Shutdown(ctx); err != nil {
			t.Errorf("%v: Shutdown: %v", c.env, err)
		}
		cancel()
	}
}
