package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// protojsonOptions are those of every JSON output: proto field names,
// every field.
var protojsonOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// writeJSON prints m as protojson with the proto field names and every
// field, indented by two spaces. protojson's own spacing is deliberately
// unstable, so the output is re-indented with encoding/json.
func writeJSON(w io.Writer, m proto.Message) error {
	b, err := protojsonOptions.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// trim formats v with at most prec decimals, without trailing zeros.
func trim(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// fmtMs formats a duration in ms with 2-3 significant digits: "0 ms",
// "6.4 ms", "12.5 ms", "140 ms", "1234 ms", "123 s".
func fmtMs(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Sprint(v)
	case v == 0:
		return "0 ms"
	case v < 0.01:
		return "<0.01 ms"
	case v < 10:
		return trim(v, 2) + " ms"
	case v < 100:
		return trim(v, 1) + " ms"
	case v < 100000:
		return trim(v, 0) + " ms"
	}
	return trim(v/1000, 0) + " s"
}

// fmtPct formats a fraction 0..1 as a percentage: "0%", "0.87%", "12.5%",
// "100%"; values that are not exactly 0 or 1 never round to them.
func fmtPct(p float64) string {
	v := p * 100
	switch {
	case math.IsNaN(v):
		return "NaN"
	case p <= 0:
		return "0%"
	case p >= 1:
		return "100%"
	case v < 0.01:
		return "<0.01%"
	case v < 10:
		return trim(v, 2) + "%"
	case v < 99.95:
		return trim(v, 1) + "%"
	}
	return ">99.9%"
}

// fmtNum formats a plain number exactly, in the shortest form.
func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// fmtWeight formats a deployment weight exactly, without exponents.
func fmtWeight(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// fmtBlocks formats a block count: "4 blk".
func fmtBlocks[T ~uint32 | ~uint64 | ~int](n T) string { return fmt.Sprintf("%d blk", n) }

// fmtTokens formats a token count: "64 tok".
func fmtTokens[T ~uint32 | ~uint64 | ~int](n T) string { return fmt.Sprintf("%d tok", n) }

// fmtTPS formats a throughput: "9500 tok/s", "12.5k tok/s"; 0 is "default".
func fmtTPS(v float64) string {
	switch {
	case v <= 0:
		return "default"
	case v < 10000:
		return trim(v, 0) + " tok/s"
	case v < 1e7:
		return trim(v/1000, 1) + "k tok/s"
	}
	return trim(v/1e6, 1) + "M tok/s"
}

// fmtAge formats a report age in ms compactly: "80ms", "3s", "12m".
func fmtAge(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 100*time.Second:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 100*time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}

// fmtHash formats a block hash as the spec's vectors do: 0x + 16 hex digits.
func fmtHash(h uint64) string { return fmt.Sprintf("%#016x", h) }
