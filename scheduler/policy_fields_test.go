package scheduler_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// TestPolicyFieldsCoverPolicy: every row's accessor is the one of its kind
// and reaches a field of its own, and every Policy field has a row.
func TestPolicyFieldsCoverPolicy(t *testing.T) {
	rows := scheduler.PolicyFields()
	if n := reflect.TypeFor[scheduler.Policy]().NumField(); len(rows) != n {
		t.Fatalf("%d rows for %d Policy fields", len(rows), n)
	}
	seenKey, seenField := map[string]bool{}, map[string]string{}
	for _, f := range rows {
		if seenKey[f.Key] {
			t.Fatalf("key %q twice", f.Key)
		}
		seenKey[f.Key] = true
		accessors := map[scheduler.FieldKind]bool{
			scheduler.FieldFloat: f.Float != nil, scheduler.FieldUint32: f.Uint32 != nil, scheduler.FieldUint64: f.Uint64 != nil,
			scheduler.FieldDuration: f.Duration != nil, scheduler.FieldEnum: f.Enum != nil,
		}
		for k, set := range accessors {
			if set != (k == f.Kind) {
				t.Fatalf("%s: kind %d, accessor of kind %d set %v", f.Key, f.Kind, k, set)
			}
		}
		if (f.Kind == scheduler.FieldEnum) != (len(f.Names) > 0) {
			t.Fatalf("%s: names %v for kind %d", f.Key, f.Names, f.Kind)
		}
		// Change the field through the row: exactly one Policy field differs.
		p, d := scheduler.DefaultPolicy(), scheduler.DefaultPolicy()
		switch f.Kind {
		case scheduler.FieldFloat:
			*f.Float(&p) += 0.5
		case scheduler.FieldUint32:
			*f.Uint32(&p) += 3
		case scheduler.FieldUint64:
			*f.Uint64(&p) += 3
		case scheduler.FieldDuration:
			*f.Duration(&p) += time.Second
		case scheduler.FieldEnum:
			*f.Enum(&p) = 1 - *f.Enum(&p)
		}
		pv, dv := reflect.ValueOf(p), reflect.ValueOf(d)
		var changed []string
		for i := range pv.NumField() {
			if !pv.Field(i).Equal(dv.Field(i)) {
				changed = append(changed, pv.Type().Field(i).Name)
			}
		}
		if len(changed) != 1 {
			t.Fatalf("%s changed %v", f.Key, changed)
		}
		if prev, ok := seenField[changed[0]]; ok {
			t.Fatalf("%s and %s both reach %s", prev, f.Key, changed[0])
		}
		seenField[changed[0]] = f.Key
		if g, ok := scheduler.PolicyFieldByKey(f.Key); !ok || g.Key != f.Key {
			t.Fatalf("PolicyFieldByKey(%q) = %v, %v", f.Key, g.Key, ok)
		}
	}
	if _, ok := scheduler.PolicyFieldByKey("colour"); ok {
		t.Fatal("PolicyFieldByKey found colour")
	}
}

// TestPolicyFieldsRanges: each numeric row's bounds are valid and a value
// just past them is not, with a message naming the field, its range and
// its unit.
func TestPolicyFieldsRanges(t *testing.T) {
	for _, f := range scheduler.PolicyFields() {
		if f.Kind != scheduler.FieldFloat && f.Kind != scheduler.FieldUint32 && f.Kind != scheduler.FieldUint64 {
			continue
		}
		set := func(p *scheduler.Policy, v float64) {
			switch f.Kind {
			case scheduler.FieldFloat:
				*f.Float(p) = v
			case scheduler.FieldUint32:
				*f.Uint32(p) = uint32(v)
			case scheduler.FieldUint64:
				*f.Uint64(p) = uint64(v)
			}
		}
		over := f.Max + 1
		if f.Kind == scheduler.FieldFloat {
			over = math.Nextafter(f.Max, math.Inf(1))
		}
		bad := []float64{over}
		good := []float64{f.Max}
		if f.OpenMin {
			bad = append(bad, f.Min)
		} else {
			good = append(good, f.Min)
			if f.Min > 0 && f.Kind == scheduler.FieldFloat {
				bad = append(bad, math.Nextafter(f.Min, 0))
			} else if f.Min > 0 {
				bad = append(bad, f.Min-1)
			}
		}
		if f.ZeroOff {
			good = append(good, 0)
		}
		for _, v := range good {
			p := scheduler.DefaultPolicy()
			set(&p, v)
			if err := p.Validate(); err != nil {
				t.Errorf("%s = %v: %v", f.Key, v, err)
			}
		}
		for _, v := range bad {
			p := scheduler.DefaultPolicy()
			set(&p, v)
			err := p.Validate()
			if !errors.Is(err, scheduler.ErrInvalidPolicy) || !strings.HasPrefix(err.Error(), "invalid policy: "+f.Key+" must be") ||
				!strings.Contains(err.Error(), f.Unit) {
				t.Errorf("%s = %v: %v", f.Key, v, err)
			}
		}
	}
}

// TestPolicyFieldEnums: names by value, parsing case and spaces ignored.
func TestPolicyFieldEnums(t *testing.T) {
	for _, tc := range []struct {
		key, list string
		names     []string
	}{
		{"strategy", "softmax, threshold or argmin", []string{"softmax", "threshold", "argmin"}},
		{"on_saturation", "least_loaded, shed or queue", []string{"least_loaded", "shed", "queue"}},
		{"pd_mode", "conditional or always", []string{"conditional", "always"}},
	} {
		f, _ := scheduler.PolicyFieldByKey(tc.key)
		if got := f.NameList(); got != tc.list {
			t.Errorf("%s: NameList %q, want %q", tc.key, got, tc.list)
		}
		for i, n := range tc.names {
			if got, ok := f.EnumName(uint8(i)); !ok || got != n {
				t.Errorf("%s: EnumName(%d) = %q, %v", tc.key, i, got, ok)
			}
			if v, ok := f.ParseEnum(" " + strings.ToUpper(n) + " "); !ok || v != uint8(i) {
				t.Errorf("%s: ParseEnum(%q) = %d, %v", tc.key, n, v, ok)
			}
		}
		if _, ok := f.EnumName(uint8(len(tc.names))); ok {
			t.Errorf("%s: EnumName past the names answered", tc.key)
		}
		if _, ok := f.ParseEnum("best"); ok {
			t.Errorf("%s: ParseEnum(best) answered", tc.key)
		}
	}
}
