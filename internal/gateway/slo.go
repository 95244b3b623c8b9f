package gateway

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SLOHeader is the request header carrying the request's time-to-first-token
// target in ms (PickRequest.ttft_slo_ms), read by Map for the ext_proc
// listener and POST /v1/route: a plain decimal number of ms in (0,
// MaxSLOMs], e.g. "250" or "1500.5"; absent or empty means no target.
const SLOHeader = "x-slo-ttft-ms"

// MaxSLOMs bounds SLOHeader: 3,600,000 ms (scheduler.MaxTTFTTargetMs).
const MaxSLOMs = 3_600_000

// maxSLOHeaderBytes bounds the header's value before parsing.
const maxSLOHeaderBytes = 32

// ErrBadHeader: a request header the router reads has a bad value; the
// wrapping error names the header and says what was wrong. ErrorFor
// answers it 400 bad_request.
var ErrBadHeader = errors.New("bad header")

// ReasonSLOUnattainable is ReasonHeader's value of a 429 for a request
// whose TTFT target no instance is predicted to meet (on_slo_miss shed).
const ReasonSLOUnattainable = "slo_unattainable"

// ParseSLO returns the target in ms of SLOHeader's value v, 0 when v is
// empty. Only digits with at most one decimal point are accepted (no sign,
// exponent, hex, "inf" or "nan"), surrounding spaces ignored.
func ParseSLO(v string) (float64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	bad := func(why string) error {
		shown := v
		if len(shown) > maxSLOHeaderBytes {
			shown = shown[:maxSLOHeaderBytes] + "..."
		}
		return fmt.Errorf("%w: %s is %q: %s", ErrBadHeader, SLOHeader, shown, why)
	}
	if len(v) > maxSLOHeaderBytes {
		return 0, bad(fmt.Sprintf("longer than %d bytes", maxSLOHeaderBytes))
	}
	if strings.Trim(v, "0123456789.") != "" || strings.Count(v, ".") > 1 || v == "." {
		return 0, bad(fmt.Sprintf("want a decimal number of ms in (0, %d], e.g. 500", MaxSLOMs))
	}
	t, err := strconv.ParseFloat(v, 64)
	if err != nil || !(t > 0 && t <= MaxSLOMs) {
		return 0, bad(fmt.Sprintf("want a number of ms in (0, %d]", MaxSLOMs))
	}
	return t, nil
}
