package protoconv

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/scheduler"
)

// policyDesc is pb.Policy's field list, which PolicyProto and MergePolicy
// reach by the keys of scheduler.PolicyFields (TestPolicyFieldsMatchProto
// checks that every proto field has a row and every row a proto field).
var policyDesc = (&pb.Policy{}).ProtoReflect().Descriptor().Fields()

// PolicyProto renders every field of p as a new message. Safe for
// concurrent use.
func PolicyProto(p *scheduler.Policy) *pb.Policy {
	m := &pb.Policy{}
	r := m.ProtoReflect()
	for _, f := range scheduler.PolicyFields() {
		fd := policyDesc.ByName(protoreflect.Name(f.Key))
		switch f.Kind {
		case scheduler.FieldFloat:
			r.Set(fd, protoreflect.ValueOfFloat64(*f.Float(p)))
		case scheduler.FieldUint32:
			r.Set(fd, protoreflect.ValueOfUint32(*f.Uint32(p)))
		case scheduler.FieldUint64:
			r.Set(fd, protoreflect.ValueOfUint64(*f.Uint64(p)))
		case scheduler.FieldDuration:
			r.Set(fd, protoreflect.ValueOfMessage(durationpb.New(*f.Duration(p)).ProtoReflect()))
		case scheduler.FieldEnum:
			// An unknown value renders as the proto's 0 (unspecified).
			if name, ok := f.EnumName(*f.Enum(p)); ok {
				r.Set(fd, protoreflect.ValueOfEnum(enumNumber(fd.Enum(), name)))
			}
		}
	}
	return m
}

// MergePolicy returns base with the fields set in m, validated: a
// *scheduler.PolicyError (wrapping scheduler.ErrInvalidPolicy) lists what m
// cannot carry (an enum value that is not one of the field's, an invalid
// duration) and every problem of Policy.Validate. A nil m sets no field; an
// enum at 0 (unspecified) keeps base's value. Safe for concurrent use.
func MergePolicy(base scheduler.Policy, m *pb.Policy) (scheduler.Policy, error) {
	p := base
	if m == nil {
		return p, p.Validate() // found by FuzzSetPolicy: SetPolicy without a policy panicked
	}
	r := m.ProtoReflect()
	var problems []string // conversion problems, reported with Validate's
	for _, f := range scheduler.PolicyFields() {
		fd := policyDesc.ByName(protoreflect.Name(f.Key))
		if !r.Has(fd) {
			continue
		}
		v := r.Get(fd)
		switch f.Kind {
		case scheduler.FieldFloat:
			*f.Float(&p) = v.Float()
		case scheduler.FieldUint32:
			*f.Uint32(&p) = uint32(v.Uint())
		case scheduler.FieldUint64:
			*f.Uint64(&p) = v.Uint()
		case scheduler.FieldDuration:
			d := v.Message().Interface().(*durationpb.Duration)
			if err := d.CheckValid(); err != nil {
				problems = append(problems, fmt.Sprintf("%s is not a valid duration: %v", f.Key, err))
				continue
			}
			*f.Duration(&p) = d.AsDuration()
		case scheduler.FieldEnum:
			e, ok := enumValue(&f, fd.Enum(), v.Enum())
			if !ok {
				problems = append(problems, fmt.Sprintf("%s must be %s, got %d", f.Key, f.NameList(), v.Enum()))
				continue
			}
			*f.Enum(&p) = e
		}
	}
	var pe *scheduler.PolicyError
	if err := p.Validate(); errors.As(err, &pe) {
		problems = append(problems, pe.Problems...)
	}
	if len(problems) > 0 {
		return p, &scheduler.PolicyError{Problems: problems}
	}
	return p, nil
}

// enumPrefix is the prefix of an enum's value names: its zero value's name
// without UNSPECIFIED, e.g. "STRATEGY_".
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	return strings.TrimSuffix(string(ed.Values().Get(0).Name()), "UNSPECIFIED")
}

// enumNumber is the number of the proto value that name (a
// scheduler.PolicyField name, e.g. "least_loaded") stands for, e.g.
// ON_SATURATION_LEAST_LOADED; 0 when there is none
// (TestPolicyFieldsMatchProto checks there always is).
func enumNumber(ed protoreflect.EnumDescriptor, name string) protoreflect.EnumNumber {
	if ev := ed.Values().ByName(protoreflect.Name(enumPrefix(ed) + strings.ToUpper(name))); ev != nil {
		return ev.Number()
	}
	return 0
}

// enumValue is the scheduler value of proto value n of field f, and false
// when n is not one of its named values.
func enumValue(f *scheduler.PolicyField, ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) (uint8, bool) {
	ev := ed.Values().ByNumber(n)
	if ev == nil || n == 0 {
		return 0, false
	}
	return f.ParseEnum(strings.TrimPrefix(string(ev.Name()), enumPrefix(ed)))
}

// policyCacheSlots is the size of SharedPolicyProto's cache: more distinct
// policies than a router's pools usually have.
const policyCacheSlots = 16

// policyEntry is one rendered policy of SharedPolicyProto's cache.
type policyEntry struct {
	p   scheduler.Policy
	msg *pb.Policy
}

// policyCache holds the latest rendered policies, by policyHash.
var policyCache [policyCacheSlots]atomic.Pointer[policyEntry]

// SharedPolicyProto is PolicyProto(p) shared with every other caller
// rendering an equal policy, which must not modify it: the message of an
// audited Pick response, rendered once per policy rather than once per
// pick. A policy not in the cache is rendered and replaces the entry in its
// slot. Safe for concurrent use.
func SharedPolicyProto(p *scheduler.Policy) *pb.Policy {
	slot := &policyCache[policyHash(p)%policyCacheSlots]
	if e := slot.Load(); e != nil && e.p == *p {
		return e.msg
	}
	e := &policyEntry{p: *p, msg: PolicyProto(p)}
	slot.Store(e)
	return e.msg
}

// policyHash spreads policies over the cache's slots by the fields that
// usually differ between pools; equal policies always share a slot.
func policyHash(p *scheduler.Policy) uint64 {
	h := uint64(p.Strategy) ^ uint64(p.BlockSizeTokens)*0x9e3779b97f4a7c15
	for _, v := range [...]float64{p.LambdaH, p.DeltaMs, p.DefaultPrefillTokensPerSecond, p.MaxQueueMs, p.DeploymentDeltaMs} {
		h = (h ^ uint64(int64(v*1024))) * 0x100000001b3
	}
	return h ^ h>>32
}
