package scheduler

import (
	"slices"
	"time"
)

// FieldKind is the Go type of a Policy field, which says which accessor of
// its PolicyField is set. A plain value.
type FieldKind uint8

const (
	// FieldFloat is a float64 (PolicyField.Float).
	FieldFloat FieldKind = iota
	// FieldUint32 is a uint32 (PolicyField.Uint32).
	FieldUint32
	// FieldUint64 is a uint64 (PolicyField.Uint64).
	FieldUint64
	// FieldDuration is a time.Duration (PolicyField.Duration).
	FieldDuration
	// FieldEnum is a Strategy, a Saturation, an SLOMiss, a CalibrationMode,
	// a PDFallback or a PDMode, named by PolicyField.Names
	// (PolicyField.Enum).
	FieldEnum
)

// PolicyField is one field of Policy: its name everywhere outside Go (the
// proto field, the state file's and the simulator's keys, prefixctl's
// KEY=VALUE), its kind, unit and range, and an accessor. The one list of
// Policy fields (PolicyFields) drives Validate's messages, the proto
// conversion (internal/protoconv), the state file (internal/store), the
// simulator's YAML (internal/sim) and prefixctl's policy commands. A plain
// value, safe for concurrent reads.
type PolicyField struct {
	// Key is the proto field name, e.g. "delta_ms".
	Key  string
	Kind FieldKind
	// Unit is the unit of the value as messages print it: "ms", "tokens",
	// "tokens/s", "blocks", "picks", or "" (a plain number, a duration, a
	// name).
	Unit string
	// Fraction marks a share of 1 (shown as a percentage by prefixctl).
	Fraction bool
	// ZeroOff marks a field whose 0 turns what it governs off.
	ZeroOff bool
	// Min and Max bound a FieldFloat, FieldUint32 or FieldUint64 value,
	// inclusive, except Min when OpenMin: (Min, Max]. With ZeroOff and
	// Min > 0, 0 is valid too.
	Min, Max float64
	OpenMin  bool
	// MinDuration and MaxDuration bound a FieldDuration value, inclusive.
	// forget_after's lower bound is stale_after's value instead.
	MinDuration, MaxDuration time.Duration
	// Names are a FieldEnum's value names by value, e.g. softmax,
	// threshold, argmin.
	Names []string
	// enumType names an unknown FieldEnum value in messages: "Strategy(7)".
	enumType string
	// Meaning is one line for prefixctl's policy table.
	Meaning string
	// The accessor of the field's kind returns a pointer to the field of p;
	// the others are nil.
	Float    func(p *Policy) *float64
	Uint32   func(p *Policy) *uint32
	Uint64   func(p *Policy) *uint64
	Duration func(p *Policy) *time.Duration
	Enum     func(p *Policy) *uint8
	// explain, when set, replaces the range check of Validate's
	// explanation.
	explain func(f *PolicyField, p *Policy, c *checker)
}

// policyFields is the table behind PolicyFields, in proto field order.
var policyFields = []PolicyField{
	{Key: "strategy", Kind: FieldEnum, Names: strategyNames[:], enumType: "Strategy", Meaning: "softmax, threshold or argmin",
		Enum: func(p *Policy) *uint8 { return (*uint8)(&p.Strategy) }},
	{Key: "lambda_h", Kind: FieldFloat, Max: MaxLambdaH, Meaning: "x2 odds per +1/lambda_h hit ratio",
		Float: func(p *Policy) *float64 { return &p.LambdaH }},
	{Key: "delta_ms", Kind: FieldFloat, Unit: "ms", Min: MinDeltaMs, Max: MaxDeltaMs, Meaning: "softmax: /2 odds per delta_ms",
		Float: func(p *Policy) *float64 { return &p.DeltaMs }},
	{Key: "threshold_ratio", Kind: FieldFloat, Fraction: true, Max: MaxThresholdRatio, Meaning: "threshold band, of the min cost",
		Float: func(p *Policy) *float64 { return &p.ThresholdRatio }},
	{Key: "threshold_min_ms", Kind: FieldFloat, Unit: "ms", Max: MaxThresholdMinMs, Meaning: "threshold band, at least",
		Float: func(p *Policy) *float64 { return &p.ThresholdMinMs }},
	{Key: "batch_wait_ms", Kind: FieldFloat, Unit: "ms", Max: MaxBatchWaitMs, Meaning: "added to every cost",
		Float: func(p *Policy) *float64 { return &p.BatchWaitMs }},
	{Key: "block_size_tokens", Kind: FieldUint32, Unit: "tokens", Min: 1, Max: MaxBlockSizeTokens, Meaning: "if an instance reports none",
		Uint32: func(p *Policy) *uint32 { return &p.BlockSizeTokens }},
	{Key: "default_prefill_tokens_per_second", Kind: FieldFloat, Unit: "tokens/s", Min: MinPrefillTokensPerSecond,
		Max: MaxPrefillTokensPerSecond, Meaning: "if an instance reports none",
		Float: func(p *Policy) *float64 { return &p.DefaultPrefillTokensPerSecond }},
	{Key: "max_kv_usage", Kind: FieldFloat, Fraction: true, Min: 0, OpenMin: true, Max: 1, Meaning: "exclude instances at or over",
		Float: func(p *Policy) *float64 { return &p.MaxKVUsage }},
	{Key: "max_queue_ms", Kind: FieldFloat, Unit: "ms", ZeroOff: true, Max: MaxMaxQueueMs, Meaning: "exclude instances over (0 = off)",
		Float: func(p *Policy) *float64 { return &p.MaxQueueMs }},
	{Key: "deployment_delta_ms", Kind: FieldFloat, Unit: "ms", ZeroOff: true, Min: MinDeltaMs, Max: MaxDeltaMs,
		Meaning: "deployment load term (0 = off)", Float: func(p *Policy) *float64 { return &p.DeploymentDeltaMs }},
	{Key: "stale_after", Kind: FieldDuration, MinDuration: MinStaleAfter, MaxDuration: MaxStaleAfter,
		Meaning: "exclude without a report for", Duration: func(p *Policy) *time.Duration { return &p.StaleAfter }},
	{Key: "forget_after", Kind: FieldDuration, MaxDuration: MaxForgetAfter, Meaning: "forget disconnected after",
		Duration: func(p *Policy) *time.Duration { return &p.ForgetAfter }, explain: explainForgetAfter},
	{Key: "default_kv_capacity_blocks", Kind: FieldUint64, Unit: "blocks", Min: 1, Max: float64(MaxDefaultKVCapacityBlocks),
		Meaning: "index size if none reported", Uint64: func(p *Policy) *uint64 { return &p.DefaultKVCapacityBlocks }},
	{Key: "on_saturation", Kind: FieldEnum, Names: saturationNames[:], enumType: "Saturation", Meaning: "if saturated: least_loaded,shed,queue",
		Enum: func(p *Policy) *uint8 { return (*uint8)(&p.OnSaturation) }},
	{Key: "doubling_context_tokens", Kind: FieldFloat, Unit: "tokens", ZeroOff: true, Min: MinDoublingContextTokens,
		Max: MaxDoublingContextTokens, Meaning: "context doubling a token's prefill (0 = off)",
		Float: func(p *Policy) *float64 { return &p.DoublingContextTokens }},
	{Key: "on_slo_miss", Kind: FieldEnum, Names: sloMissNames[:], enumType: "SLOMiss", Meaning: "TTFT target unmet: best_effort, shed",
		Enum: func(p *Policy) *uint8 { return (*uint8)(&p.OnSLOMiss) }},
	{Key: "calibration", Kind: FieldEnum, Names: calibrationNames[:], enumType: "CalibrationMode", Meaning: "fitted prefill: apply, observe",
		Enum: func(p *Policy) *uint8 { return (*uint8)(&p.Calibration) }},
	{Key: "pd_min_uncached_tokens", Kind: FieldUint32, Unit: "tokens", Max: MaxPDMinUncachedTokens,
		Meaning: "disaggregate from this many uncached tokens", Uint32: func(p *Policy) *uint32 { return &p.PDMinUncachedTokens }},
	{Key: "pd_transfer_ms_per_token", Kind: FieldFloat, Unit: "ms", Max: MaxPDTransferMsPerToken,
		Meaning: "KV transfer, prefill to decode, per token", Float: func(p *Policy) *float64 { return &p.PDTransferMsPerToken }},
	{Key: "pd_fallback", Kind: FieldEnum, Names: pdFallbackNames[:], enumType: "PDFallback", Meaning: "no prefill instance: local, fail",
		Enum: func(p *Policy) *uint8 { return (*uint8)(&p.PDFallback) }},
	{Key: "pd_interference_weight", Kind: FieldFloat, Max: MaxPDInterferenceWeight,
		Meaning: "TTFT ms per ms of decode stall", Float: func(p *Policy) *float64 { return &p.PDInterferenceWeight }},
	{Key: "pd_decode_running_ms", Kind: FieldFloat, Unit: "ms", Max: MaxPDDecodeRunningMs,
		Meaning: "decode instance cost per running request", Float: func(p *Policy) *float64 { return &p.PDDecodeRunningMs }},
	{Key: "pd_mode", Kind: FieldEnum, Names: pdModeNames[:], enumType: "PDMode", Meaning: "prefill instance: conditional, always",
		Enum: func(p *Policy) *uint8 { return (*uint8)(&p.PDMode) }},
	{Key: "short_lanes", Kind: FieldUint32, Unit: "instances", ZeroOff: true, Max: MaxShortLanes,
		Meaning: "short-prefill lane (0 = off)", Uint32: func(p *Policy) *uint32 { return &p.ShortLanes }},
	{Key: "short_lane_max_prefill_ms", Kind: FieldFloat, Unit: "ms", Min: MinShortLaneMaxPrefillMs, Max: MaxShortLaneMaxPrefillMs,
		Meaning: "longest prefill a lane takes", Float: func(p *Policy) *float64 { return &p.ShortLaneMaxPrefillMs }},
	{Key: "queue_ttl", Kind: FieldDuration, MinDuration: MinQueueTTL, MaxDuration: MaxQueueTTL,
		Meaning: "queue: longest wait of a pick", Duration: func(p *Policy) *time.Duration { return &p.QueueTTL }},
	{Key: "queue_max_waiting", Kind: FieldUint32, Unit: "picks", Min: 1, Max: MaxQueueWaiting,
		Meaning: "queue: most waiting, per pool", Uint32: func(p *Policy) *uint32 { return &p.QueueMaxWaiting }},
	{Key: "queue_max_per_band", Kind: FieldUint32, Unit: "picks", Min: 1, Max: MaxQueueWaiting,
		Meaning: "queue: most waiting, per band", Uint32: func(p *Policy) *uint32 { return &p.QueueMaxPerBand }},
	{Key: "dispatch_spacing_ms", Kind: FieldFloat, Unit: "ms", ZeroOff: true, Max: MaxDispatchSpacingMs,
		Meaning: "spacing of answers per instance", Float: func(p *Policy) *float64 { return &p.DispatchSpacingMs }},
}

// PolicyFields returns every Policy field, in the proto's field order (a
// copy; the rows' accessors are shared). Safe for concurrent use.
func PolicyFields() []PolicyField { return slices.Clone(policyFields) }

// PolicyFieldByKey returns the field named key, and false when there is
// none. Safe for concurrent use.
func PolicyFieldByKey(key string) (PolicyField, bool) {
	for i := range policyFields {
		if policyFields[i].Key == key {
			return policyFields[i], true
		}
	}
	return PolicyField{}, false
}

// EnumName returns the name of value v of a FieldEnum field, and false
// when v is not one of its values.
func (f *PolicyField) EnumName(v uint8) (string, bool) {
	if int(v) < len(f.Names) {
		return f.Names[v], true
	}
	return "", false
}

// ParseEnum returns the value named s of a FieldEnum field (case and
// surrounding spaces ignored), and false when s names none.
func (f *PolicyField) ParseEnum(s string) (uint8, bool) {
	i, ok := lookupName(f.Names, s)
	return uint8(i), ok
}

// NameList is a FieldEnum's names as a message lists them: "a, b or c".
func (f *PolicyField) NameList() string { return orList(f.Names) }

// orList joins names as "a, b or c".
func orList(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	s := names[0]
	for _, n := range names[1 : len(names)-1] {
		s += ", " + n
	}
	return s + " or " + names[len(names)-1]
}
