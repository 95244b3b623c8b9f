package gateway

import (
	"errors"
	"strings"
	"testing"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// TestParseSLO: the header's accepted forms and every refusal, at the
// edges.
func TestParseSLO(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  string // substring of the error; "" for none
	}{
		{"", 0, ""},
		{"  ", 0, ""},
		{"250", 250, ""},
		{" 1500.5 ", 1500.5, ""},
		{"0.001", 0.001, ""},
		{"3600000", 3600000, ""},
		{"3600000.1", 0, "want a number of ms in (0, 3600000]"},
		{"0", 0, "want a number of ms in (0, 3600000]"},
		{"0.0", 0, "want a number of ms in (0, 3600000]"},
		{"-5", 0, "want a decimal number"},
		{"1e3", 0, "want a decimal number"},
		{"inf", 0, "want a decimal number"},
		{"NaN", 0, "want a decimal number"},
		{"0x10", 0, "want a decimal number"},
		{"1.2.3", 0, "want a decimal number"},
		{".", 0, "want a decimal number"},
		{"250ms", 0, "want a decimal number"},
		{strings.Repeat("1", 33), 0, "longer than 32 bytes"},
	}
	for _, tt := range tests {
		got, err := ParseSLO(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseSLO(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !errors.Is(err, ErrBadHeader) || !strings.Contains(err.Error(), tt.err) ||
			!strings.Contains(err.Error(), SLOHeader)):
			t.Errorf("ParseSLO(%q) = %v, %v; want an ErrBadHeader naming %s with %q", tt.in, got, err, SLOHeader, tt.err)
		}
	}
}

// TestMapSLOHeader: Map copies the header into ttft_slo_ms and refuses a
// bad one.
func TestMapSLOHeader(t *testing.T) {
	m, err := NewMapper(Config{DefaultPool: "chat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"m","prompt":"hello"}`)
	hdr := func(v string) func(string) string {
		return func(name string) string {
			if name == SLOHeader {
				return v
			}
			return ""
		}
	}
	var req pb.PickRequest
	if err := m.Map(Request{Path: "/v1/completions", Header: hdr("300"), Body: body}, &req); err != nil || req.GetTtftSloMs() != 300 {
		t.Fatalf("Map with %s: 300: ttft_slo_ms %v, %v", SLOHeader, req.GetTtftSloMs(), err)
	}
	if err := m.Map(Request{Path: "/v1/completions", Header: hdr(""), Body: body}, &req); err != nil || req.GetTtftSloMs() != 0 {
		t.Fatalf("Map without %s: ttft_slo_ms %v, %v", SLOHeader, req.GetTtftSloMs(), err)
	}
	err = m.Map(Request{Path: "/v1/completions", Header: hdr("soon"), Body: body}, &req)
	if e := ErrorFor(err); e == nil || e.Status != 400 || e.Reason != ReasonBadRequest {
		t.Fatalf("Map with %s: soon: %v, want 400 bad_request", SLOHeader, err)
	}
}
