package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

// policyKey describes one Policy field for the table and the parser.
type policyKey struct {
	name    string // the proto field name
	unit    string // "", "ms", "%", "tok", "tok/s", "blk", "picks", "inst", "dur"
	zeroOff bool   // 0 turns it off (shown as "off")
	meaning string
}

// policyKeys lists every Policy field in proto order, from
// scheduler.PolicyFields (a test checks it against the descriptor).
var policyKeys = func() []policyKey {
	units := map[string]string{"ms": "ms", "tokens": "tok", "tokens/s": "tok/s", "blocks": "blk", "picks": "picks", "instances": "inst"}
	var keys []policyKey
	for _, f := range scheduler.PolicyFields() {
		k := policyKey{name: f.Key, unit: units[f.Unit], zeroOff: f.ZeroOff, meaning: f.Meaning}
		switch {
		case f.Fraction:
			k.unit = "%"
		case f.Kind == scheduler.FieldDuration:
			k.unit = "dur"
		}
		keys = append(keys, k)
	}
	return keys
}()

func policyKeyNames() []string {
	out := make([]string, len(policyKeys))
	for i, k := range policyKeys {
		out[i] = k.name
	}
	return out
}

func lookupPolicyKey(name string) *policyKey {
	for i := range policyKeys {
		if policyKeys[i].name == name {
			return &policyKeys[i]
		}
	}
	return nil
}

// parsePolicy turns KEY=VALUE arguments into a Policy with those fields set.
func parsePolicy(args []string) (*pb.Policy, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no KEY=VALUE given; keys: %s", strings.Join(policyKeyNames(), ", "))
	}
	p := &pb.Policy{}
	m := p.ProtoReflect()
	fields := m.Descriptor().Fields()
	seen := map[string]bool{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want KEY=VALUE", a)
		}
		fd := fields.ByName(protoreflect.Name(k))
		key := lookupPolicyKey(k)
		if fd == nil || key == nil {
			return nil, fmt.Errorf("unknown policy key %q; keys: %s", k, strings.Join(policyKeyNames(), ", "))
		}
		if seen[k] {
			return nil, fmt.Errorf("policy key %q given twice", k)
		}
		seen[k] = true
		val, err := parsePolicyValue(fd, key, strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %v", k, v, err)
		}
		m.Set(fd, val)
	}
	return p, nil
}

// parsePolicyValue parses one value by the field's kind and unit.
func parsePolicyValue(fd protoreflect.FieldDescriptor, key *policyKey, v string) (protoreflect.Value, error) {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		prefix, names := enumNames(fd.Enum())
		name := strings.ToUpper(v)
		if !strings.HasPrefix(name, prefix) {
			name = prefix + name
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(name))
		if ev == nil || ev.Number() == 0 {
			return protoreflect.Value{}, fmt.Errorf("want %s", orList(names))
		}
		return protoreflect.ValueOfEnum(ev.Number()), nil
	case protoreflect.DoubleKind:
		scale := 1.0
		switch {
		case key.unit == "%" && strings.HasSuffix(v, "%"):
			v, scale = strings.TrimSpace(strings.TrimSuffix(v, "%")), 0.01
		case key.unit == "ms":
			v = strings.TrimSpace(strings.TrimSuffix(v, "ms"))
		case key.unit == "tok/s":
			v = strings.TrimSpace(strings.TrimSuffix(v, "tok/s"))
		case key.unit == "tok":
			v = strings.TrimSpace(strings.TrimSuffix(v, "tok"))
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return protoreflect.Value{}, fmt.Errorf("want a finite number")
		}
		return protoreflect.ValueOfFloat64(f * scale), nil
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		bits := 64
		if fd.Kind() == protoreflect.Uint32Kind {
			bits = 32
		}
		n, err := strconv.ParseUint(v, 10, bits)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("want a whole number in [0, %d]", uint64(1)<<bits-1)
		}
		if bits == 32 {
			return protoreflect.ValueOfUint32(uint32(n)), nil
		}
		return protoreflect.ValueOfUint64(n), nil
	case protoreflect.MessageKind:
		d, err := time.ParseDuration(v)
		if err != nil {
			return protoreflect.Value{}, fmt.Errorf("want a duration like 2s or 500ms")
		}
		return protoreflect.ValueOfMessage(durationpb.New(d).ProtoReflect()), nil
	}
	return protoreflect.Value{}, fmt.Errorf("field kind %v is not supported", fd.Kind())
}

// enumNames returns an enum's value prefix (its zero value's name without
// UNSPECIFIED, e.g. "STRATEGY_") and its other values' short lower-case
// names, as prefixctl accepts and prints them.
func enumNames(ed protoreflect.EnumDescriptor) (prefix string, names []string) {
	vals := ed.Values()
	prefix = strings.TrimSuffix(string(vals.Get(0).Name()), "UNSPECIFIED")
	for i := 1; i < vals.Len(); i++ {
		names = append(names, strings.ToLower(strings.TrimPrefix(string(vals.Get(i).Name()), prefix)))
	}
	return prefix, names
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// policyValue formats one field of a policy with its unit.
func policyValue(p *pb.Policy, key *policyKey) string {
	m := p.ProtoReflect()
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(key.name))
	if fd == nil || !m.Has(fd) {
		return "unset"
	}
	v := m.Get(fd)
	switch key.unit {
	case "":
		if fd.Kind() == protoreflect.EnumKind {
			prefix, _ := enumNames(fd.Enum())
			ev := fd.Enum().Values().ByNumber(v.Enum())
			if ev == nil {
				return strconv.Itoa(int(v.Enum()))
			}
			return strings.ToLower(strings.TrimPrefix(string(ev.Name()), prefix))
		}
		return fmtNum(v.Float())
	case "%":
		return strconv.FormatFloat(v.Float()*100, 'g', 10, 64) + "%"
	case "ms":
		if v.Float() == 0 && key.zeroOff {
			return "off"
		}
		return fmtNum(v.Float()) + " ms"
	case "tok/s":
		return fmtNum(v.Float()) + " tok/s"
	case "tok", "blk", "picks", "inst":
		if fd.Kind() == protoreflect.DoubleKind { // doubling_context_tokens
			if v.Float() == 0 && key.zeroOff {
				return "off"
			}
			return fmtNum(v.Float()) + " " + key.unit
		}
		if v.Uint() == 0 && key.zeroOff { // short_lanes
			return "off"
		}
		return strconv.FormatUint(v.Uint(), 10) + " " + key.unit
	case "dur":
		if d, ok := v.Message().Interface().(*durationpb.Duration); ok {
			return d.AsDuration().String()
		}
	}
	return v.String()
}

// renderPolicy prints a policy as a table of key, value and meaning.
func renderPolicy(w io.Writer, pool string, p *pb.Policy, version uint64) {
	if version == 0 {
		fmt.Fprintf(w, "pool %s: default policy (version 0)\n", pool)
	} else {
		fmt.Fprintf(w, "pool %s: policy version %d\n", pool, version)
	}
	t := newTable(textCol("KEY"), textCol("VALUE"), nameCol("MEANING", 20))
	for i := range policyKeys {
		t.add(policyKeys[i].name, policyValue(p, &policyKeys[i]), policyKeys[i].meaning)
	}
	t.write(w)
}

// policyGet is 'prefixctl policy get POOL'.
func (c *cli) policyGet(fs *pflag.FlagSet) runner {
	return func(pos []string) error {
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.GetPolicyResponse, error) {
			return a.GetPolicy(ctx, &pb.GetPolicyRequest{Pool: pos[0]})
		}, func(w io.Writer, r *pb.GetPolicyResponse) { renderPolicy(w, pos[0], r.GetPolicy(), r.GetVersion()) })
	}
}

// policySet is 'prefixctl policy set POOL KEY=VALUE... [--create]'.
func (c *cli) policySet(fs *pflag.FlagSet) runner {
	create := createFlag(fs)
	return func(pos []string) error {
		p, err := parsePolicy(pos[1:])
		if err != nil {
			return usagef("%v", err)
		}
		return adminCall(c, func(ctx context.Context, a pb.AdminServiceClient) (*pb.SetPolicyResponse, error) {
			return a.SetPolicy(ctx, &pb.SetPolicyRequest{Pool: pos[0], Policy: p, AllowNewPool: *create})
		}, func(w io.Writer, r *pb.SetPolicyResponse) { renderPolicy(w, pos[0], r.GetPolicy(), r.GetVersion()) })
	}
}
