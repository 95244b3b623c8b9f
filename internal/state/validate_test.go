package state

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateIdentity(t *testing.T) {
	r := NewRegistry(Limits{})
	ok := Identity{Pool: "p", Deployment: "d", Instance: "i", Address: "10.0.0.1:8000"}
	n128 := strings.Repeat("n", 128)
	// 126 ASCII bytes + a 2-byte rune = 128 bytes.
	utf128 := strings.Repeat("n", 126) + "é"
	tests := []struct {
		name  string
		edit  func(*Identity)
		field string // "" = valid
	}{
		{"valid", func(*Identity) {}, ""},
		{"128-byte names", func(id *Identity) {
			id.Pool, id.Deployment, id.Instance, id.Address = n128, n128, n128, n128[:63]+"."+n128[:59]+":1"
		}, ""},
		{"128 bytes with multibyte rune", func(id *Identity) { id.Instance = utf128 }, ""},
		{"129-byte pool", func(id *Identity) { id.Pool = n128 + "x" }, "pool is 129 bytes"},
		{"129-byte deployment", func(id *Identity) { id.Deployment = n128 + "x" }, "deployment is 129 bytes"},
		{"129-byte instance", func(id *Identity) { id.Instance = utf128 + "x" }, "instance_id is 129 bytes"},
		{"129-byte address", func(id *Identity) { id.Address = n128 + "x" }, "address is 129 bytes"},
		{"empty pool", func(id *Identity) { id.Pool = "" }, "pool is empty"},
		{"empty deployment", func(id *Identity) { id.Deployment = "" }, "deployment is empty"},
		{"empty instance", func(id *Identity) { id.Instance = "" }, "instance_id is empty"},
		{"empty address", func(id *Identity) { id.Address = "" }, "address is empty"},
		{"invalid UTF-8", func(id *Identity) { id.Instance = "a\xffb" }, "instance_id is not valid UTF-8"},
		{"control character", func(id *Identity) { id.Deployment = "a\nb" }, "deployment contains control character U+000A"},
		{"DEL", func(id *Identity) { id.Address = "a\x7f" }, "address contains control character U+007F"},
		{"C1 control", func(id *Identity) { id.Pool = "a\u0085" }, "pool contains control character U+0085"},
		{"unicode letters ok", func(id *Identity) { id.Pool = "модель-池" }, ""},
		{"address without port", func(id *Identity) { id.Address = "10.0.0.1" }, `address "10.0.0.1" is not host:port (missing port in address)`},
		{"address port 0", func(id *Identity) { id.Address = "10.0.0.1:0" }, `address "10.0.0.1:0": port "0" is not a number in 1-65535`},
		{"address port 65536", func(id *Identity) { id.Address = "h:65536" }, `port "65536" is not a number in 1-65535`},
		{"address port 65535", func(id *Identity) { id.Address = "h:65535" }, ""},
		{"address IPv6", func(id *Identity) { id.Address = "[2001:db8::1]:8000" }, ""},
		{"address not a DNS name", func(id *Identity) { id.Address = "my_host:8000" }, `host "my_host" contains '_'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := ok
			tc.edit(&id)
			err := r.ValidateIdentity(id)
			checkValidation(t, err, ErrInvalidReport, tc.field)
		})
	}
	// The limit is configurable.
	small := NewRegistry(Limits{MaxNameBytes: 4})
	if err := small.ValidateIdentity(Identity{Pool: "pppp", Deployment: "d", Instance: "i", Address: "aaaaa"}); err == nil ||
		!strings.Contains(err.Error(), "address is 5 bytes; the limit is 4") {
		t.Fatalf("MaxNameBytes 4: %v", err)
	}
}

func checkValidation(t *testing.T, err, sentinel error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("error %q does not mention %q", err, field)
	}
}

func TestValidateReport(t *testing.T) {
	r := NewRegistry(Limits{MaxBlockEvents: 10})
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		rep   Report
		field string
	}{
		{"zero report", Report{}, ""},
		{"kv 1.0 ok", Report{KVCacheUsage: 1.0}, ""},
		{"kv 0 ok", Report{KVCacheUsage: 0}, ""},
		{"kv 1.0000001", Report{KVCacheUsage: 1.0000001}, "kv_cache_usage is 1.0000001"},
		{"kv negative", Report{KVCacheUsage: -1e-300}, "kv_cache_usage"},
		{"kv NaN", Report{KVCacheUsage: nan}, "kv_cache_usage is NaN"},
		{"kv +Inf", Report{KVCacheUsage: inf}, "kv_cache_usage"},
		{"queue_ms 0 ok", Report{HasQueueMs: true}, ""},
		{"queue_ms huge ok", Report{HasQueueMs: true, QueueMs: 1e300}, ""},
		{"queue_ms negative", Report{HasQueueMs: true, QueueMs: -1}, "queue_ms is -1"},
		{"queue_ms NaN", Report{HasQueueMs: true, QueueMs: nan}, "queue_ms is NaN"},
		{"queue_ms Inf", Report{HasQueueMs: true, QueueMs: inf}, "queue_ms is +Inf"},
		{"queue_ms unset is not checked", Report{QueueMs: nan}, ""},
		{"prefill 0 ok", Report{PrefillTokensPerSecond: 0}, ""},
		{"prefill negative", Report{PrefillTokensPerSecond: -0.5}, "prefill_tokens_per_second is -0.5"},
		{"prefill NaN", Report{PrefillTokensPerSecond: nan}, "prefill_tokens_per_second is NaN"},
		{"prefill -Inf", Report{PrefillTokensPerSecond: -inf}, "prefill_tokens_per_second"},
		{"block size at limit", Report{BlockSizeTokens: 1 << 20}, ""},
		{"block size over limit", Report{BlockSizeTokens: 1<<20 + 1}, "block_size_tokens is 1048577"},
		{"events at limit", Report{Stored: make([]uint64, 6), Removed: make([]uint64, 4)}, ""},
		{"events over limit", Report{Stored: make([]uint64, 6), Removed: make([]uint64, 5)}, "11 block events (stored + removed); the limit is 10"},
		{"stored alone over limit", Report{Stored: make([]uint64, 11)}, "block events"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkValidation(t, r.ValidateReport(&tc.rep), ErrInvalidReport, tc.field)
		})
	}
	// The default limit.
	d := NewRegistry(Limits{})
	if err := d.ValidateReport(&Report{Stored: make([]uint64, DefaultMaxBlockEvents)}); err != nil {
		t.Fatal(err)
	}
	if err := d.ValidateReport(&Report{Stored: make([]uint64, DefaultMaxBlockEvents+1)}); !errors.Is(err, ErrInvalidReport) {
		t.Fatalf("default limit+1: %v", err)
	}
}

func TestValidatePick(t *testing.T) {
	r := NewRegistry(Limits{MaxPrefixBlocks: 16, MaxExcludes: 3})
	nan, inf := math.NaN(), math.Inf(1)
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		in    PickInput
		field string
	}{
		{"empty", PickInput{}, ""},
		{"prefix at limit", PickInput{Hashes: make([]uint64, 16)}, ""},
		{"prefix over limit", PickInput{Hashes: make([]uint64, 17)}, "prefix_hashes has 17 hashes; the limit is 16"},
		{"excludes at limit", PickInput{Exclude: []string{"a", "b"}, Overrides: []Override{{Instance: "c"}}}, ""},
		{"excludes over limit", PickInput{Exclude: []string{"a", "b"}, Overrides: []Override{{Instance: "c"}, {Instance: "d"}}},
			"exclude_instances + load_snapshot.instances has 4 entries; the limit is 3"},
		{"override queue_ms ok", PickInput{Overrides: []Override{{QueueMs: f(0)}}}, ""},
		{"override queue_ms negative", PickInput{Overrides: []Override{{}, {QueueMs: f(-1)}}}, "load_snapshot.instances[1].queue_ms is -1"},
		{"override queue_ms NaN", PickInput{Overrides: []Override{{QueueMs: &nan}}}, "load_snapshot.instances[0].queue_ms is NaN"},
		{"override queue_ms Inf", PickInput{Overrides: []Override{{QueueMs: &inf}}}, "queue_ms is +Inf"},
		{"override prefill NaN", PickInput{Overrides: []Override{{PrefillTokensPerSecond: &nan}}}, "load_snapshot.instances[0].prefill_tokens_per_second is NaN"},
		{"override prefill negative", PickInput{Overrides: []Override{{PrefillTokensPerSecond: f(-2)}}}, "prefill_tokens_per_second is -2"},
		{"override kv 1.0 ok", PickInput{Overrides: []Override{{KVCacheUsage: f(1.0)}}}, ""},
		{"override kv 1.0000001", PickInput{Overrides: []Override{{KVCacheUsage: f(1.0000001)}}}, "load_snapshot.instances[0].kv_cache_usage is 1.0000001"},
		{"override kv negative", PickInput{Overrides: []Override{{KVCacheUsage: f(-0.1)}}}, "kv_cache_usage is -0.1"},
		{"override kv NaN", PickInput{Overrides: []Override{{KVCacheUsage: &nan}}}, "kv_cache_usage is NaN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkValidation(t, r.ValidatePick(&tc.in), ErrInvalidPick, tc.field)
		})
	}
	d := NewRegistry(Limits{})
	if err := d.ValidatePick(&PickInput{Hashes: make([]uint64, DefaultMaxPrefixBlocks)}); err != nil {
		t.Fatal(err)
	}
	if err := d.ValidatePick(&PickInput{Hashes: make([]uint64, DefaultMaxPrefixBlocks+1)}); !errors.Is(err, ErrInvalidPick) {
		t.Fatalf("default limit+1: %v", err)
	}
}

// TestLimitsDefaults: zero and negative fields take their defaults.
func TestLimitsDefaults(t *testing.T) {
	want := Limits{DefaultMaxPools, DefaultMaxInstancesPerPool, DefaultMaxPrefixBlocks, DefaultMaxBlockEvents,
		DefaultMaxExcludes, DefaultMaxBlocksPerInstance, DefaultMaxIndexPairs, DefaultMaxNameBytes}
	if got := (Limits{}).withDefaults(); got != want {
		t.Fatalf("zero: %+v", got)
	}
	if got := (Limits{MaxPools: -1, MaxNameBytes: 7}).withDefaults(); got.MaxPools != DefaultMaxPools || got.MaxNameBytes != 7 {
		t.Fatalf("partial: %+v", got)
	}
}
