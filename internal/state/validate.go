package state

import (
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/prefixroute/prefixroute/internal/netaddr"
	"github.com/prefixroute/prefixroute/scheduler"
)

// checkName reports whether a pool, deployment, instance id or address is
// non-empty, at most max bytes, valid UTF-8 and free of control characters.
func checkName(field, v string, max int) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty", field)
	case len(v) > max:
		return fmt.Errorf("%s is %d bytes; the limit is %d", field, len(v), max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s contains control character %U", field, r)
		}
	}
	return nil
}

// ValidateIdentity checks the identity of a report stream: every name
// (checkName), and the address as host:port (netaddr.CheckHostPort: an IP
// or a DNS name, port 1-65535).
func (r *Registry) ValidateIdentity(id Identity) error {
	for _, f := range [...]struct{ name, v string }{
		{"pool", id.Pool}, {"deployment", id.Deployment},
		{"instance_id", id.Instance}, {"address", id.Address},
	} {
		if err := checkName(f.name, f.v, r.limits.MaxNameBytes); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidReport, err)
		}
	}
	// The address is what gateways will connect to: host:port, checked
	// without resolving it.
	if err := netaddr.CheckHostPort(id.Address); err != nil {
		return fmt.Errorf("%w: address %v", ErrInvalidReport, err)
	}
	return nil
}

// ValidateReport checks one load report's figures and sizes. Its error
// names every bad field, in field order, joined by "; " (as a policy's
// does). It does not allocate when rep is valid.
func (r *Registry) ValidateReport(rep *Report) error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	events := len(rep.Stored) + len(rep.Removed)
	badUsage := !finite(rep.KVCacheUsage) || rep.KVCacheUsage < 0 || rep.KVCacheUsage > 1
	badQueue := rep.HasQueueMs && (!finite(rep.QueueMs) || rep.QueueMs < 0)
	badRate := !finite(rep.PrefillTokensPerSecond) || rep.PrefillTokensPerSecond < 0
	badBlock := rep.BlockSizeTokens > maxBlockSizeTokens
	badEvents := events > r.limits.MaxBlockEvents
	badRole := rep.Role > scheduler.RoleDecode
	if !badUsage && !badQueue && !badRate && !badBlock && !badEvents && !badRole {
		return nil
	}
	var why []string
	if badUsage {
		why = append(why, fmt.Sprintf("kv_cache_usage is %v; want a fraction in [0, 1]", rep.KVCacheUsage))
	}
	if badQueue {
		why = append(why, fmt.Sprintf("queue_ms is %v; want a finite number >= 0", rep.QueueMs))
	}
	if badRate {
		why = append(why, fmt.Sprintf("prefill_tokens_per_second is %v; want a finite number >= 0", rep.PrefillTokensPerSecond))
	}
	if badBlock {
		why = append(why, fmt.Sprintf("block_size_tokens is %d; the limit is %d", rep.BlockSizeTokens, maxBlockSizeTokens))
	}
	if badEvents {
		why = append(why, fmt.Sprintf("%d block events (stored + removed); the limit is %d per report", events, r.limits.MaxBlockEvents))
	}
	if badRole {
		why = append(why, fmt.Sprintf("role is %d; want 0 or 1 (both), 2 (prefill) or 3 (decode)", protoRole(rep.Role)))
	}
	return fmt.Errorf("%w: %s", ErrInvalidReport, strings.Join(why, "; "))
}

// maxBlockSizeTokens bounds a report's block_size_tokens so token
// arithmetic cannot overflow: the policy's own bound, one limit for both.
const maxBlockSizeTokens = scheduler.MaxBlockSizeTokens

// protoRole is the report message's number of an unknown role: protoconv
// maps an out-of-range PdRole number n to scheduler.Role(n).
func protoRole(r scheduler.Role) int { return int(r) }
