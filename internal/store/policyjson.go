package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/prefixroute/prefixroute/scheduler"
)

// defaultPolicy is the policy whose fields a state file may leave out.
func defaultPolicy() scheduler.Policy { return scheduler.DefaultPolicy() }

// policyJSON is a scheduler.Policy as the state file and the audit log hold
// it: one key per scheduler.PolicyFields row, its proto name, in the
// table's order; durations as Go duration strings ("2s", "1m30s",
// "250ms"), enums by name ("argmin", "shed"), numbers as numbers. A key
// that is absent (or null) when loading takes its default value; an
// unknown key is refused. The keys are the field names the state file has
// always used, so older files load. A plain value.
type policyJSON struct {
	p   scheduler.Policy           // encoded
	raw map[string]json.RawMessage // loaded, read by decode
}

// encodePolicy returns p as its state file object. It fails, wrapping
// ErrInvalidPolicy, on what JSON cannot carry: an unknown enum value, a NaN
// or an infinity.
func encodePolicy(p scheduler.Policy) (*policyJSON, error) {
	for _, f := range scheduler.PolicyFields() {
		switch f.Kind {
		case scheduler.FieldEnum:
			if v := *f.Enum(&p); int(v) >= len(f.Names) {
				return nil, invalid(fmt.Sprintf("unknown %s %d; want %s", f.Key, v, f.NameList()), ErrInvalidPolicy)
			}
		case scheduler.FieldFloat:
			if v := *f.Float(&p); math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, invalid(fmt.Sprintf("%s is %s; want a finite number", f.Key, formatFloat(v)), ErrInvalidPolicy)
			}
		}
	}
	return &policyJSON{p: p}, nil
}

// MarshalJSON writes every field, in the table's order (a loaded j, its
// keys as loaded).
func (j *policyJSON) MarshalJSON() ([]byte, error) {
	if j.raw != nil {
		return json.Marshal(j.raw)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range scheduler.PolicyFields() {
		if i > 0 {
			b.WriteByte(',')
		}
		var v any
		switch f.Kind {
		case scheduler.FieldFloat:
			v = *f.Float(&j.p)
		case scheduler.FieldUint32:
			v = *f.Uint32(&j.p)
		case scheduler.FieldUint64:
			v = *f.Uint64(&j.p)
		case scheduler.FieldDuration:
			v = f.Duration(&j.p).String()
		case scheduler.FieldEnum:
			v, _ = f.EnumName(*f.Enum(&j.p))
		}
		key, _ := json.Marshal(f.Key)
		val, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Key, err)
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON keeps the object's values for decode; an unknown key
// fails.
func (j *policyJSON) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	for key := range raw {
		if _, ok := scheduler.PolicyFieldByKey(key); !ok {
			return fmt.Errorf("json: unknown field %q in policy", key)
		}
	}
	*j = policyJSON{raw: raw}
	return nil
}

// decode returns the policy j describes, the default policy's value for
// every absent (or null) key; a value of the wrong kind fails, naming the
// key. The result must pass Policy.Validate, so that a hand-edited file
// cannot give the scheduler a policy it refuses.
func (j *policyJSON) decode() (scheduler.Policy, error) {
	p := defaultPolicy()
	for _, f := range scheduler.PolicyFields() {
		v, ok := j.raw[f.Key]
		if !ok || string(v) == "null" {
			continue
		}
		var err error
		switch f.Kind {
		case scheduler.FieldFloat:
			err = json.Unmarshal(v, f.Float(&p))
		case scheduler.FieldUint32:
			err = json.Unmarshal(v, f.Uint32(&p))
		case scheduler.FieldUint64:
			err = json.Unmarshal(v, f.Uint64(&p))
		case scheduler.FieldDuration, scheduler.FieldEnum:
			var s string
			if err = json.Unmarshal(v, &s); err != nil {
				break
			}
			if f.Kind == scheduler.FieldEnum {
				e, ok := f.ParseEnum(s)
				if !ok {
					return p, fmt.Errorf("unknown %s %q; want %s", f.Key, s, f.NameList())
				}
				*f.Enum(&p) = e
				break
			}
			d, perr := time.ParseDuration(s)
			if perr != nil {
				return p, fmt.Errorf("%s: %q is not a duration; want e.g. \"2s\" or \"500ms\"", f.Key, s)
			}
			*f.Duration(&p) = d
		}
		if err != nil {
			return p, fmt.Errorf("%s: %w", f.Key, err)
		}
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}
