package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// newLogger returns the router's operational logger writing to w: format
// "text" (logfmt-like key=value, the default) or "json" (one object a
// line), at level "debug", "info", "warn" or "error" (--log-format,
// --log-level). Lines of gRPC calls carry the call's trace id (trace_id)
// when the caller propagated one or tracing is on. The logger is safe for
// concurrent use.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}
