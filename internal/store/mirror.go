package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// EncodePoolConfig returns c as one JSON object, the form a pool takes in
// the state file: what a cluster's key-value bucket stores per pool.
func EncodePoolConfig(c PoolConfig) ([]byte, error) {
	pj, err := encodePool(c)
	if err != nil {
		return nil, err
	}
	return json.Marshal(pj)
}

// DecodePoolConfig parses what EncodePoolConfig wrote, strictly (unknown
// fields are refused) and with the checks Open makes. The error wraps
// ErrCorruptState.
func DecodePoolConfig(data []byte) (PoolConfig, error) {
	var pj poolJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pj); err != nil {
		return PoolConfig{}, fmt.Errorf("%w: pool configuration: %v", ErrCorruptState, err)
	}
	c, err := pj.decode()
	if err != nil {
		return PoolConfig{}, fmt.Errorf("%w: pool configuration: %v", ErrCorruptState, err)
	}
	return c, nil
}

// Mirror makes next pool's configuration as decided elsewhere (another
// replica, through the cluster's bucket): durable and audited like a
// change, with no version or ramp checks, since the decision was made where
// those ran. A next equal to the configuration in force is a no-op, so a
// replica's own change coming back through the bucket's watch is not
// written twice. It reports whether anything changed.
func (s *Store) Mirror(pool string, next PoolConfig, caller string) (bool, error) {
	if err := ValidatePoolName(pool); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return false, ErrClosed
	}
	cur := *s.pools.Load()
	old, had := cur[pool]
	next = next.clone()
	if had && reflect.DeepEqual(old, next) {
		return false, nil
	}
	kind := kindWeights
	switch {
	case old.WeightsVersion != next.WeightsVersion:
	case old.PolicyVersion != next.PolicyVersion:
		kind = kindPolicy
	case next.Ramp != nil:
		kind = kindRamp
	}
	_, err := s.commit(cur, pool, kind, caller, old, next)
	return err == nil, err
}
