package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"
)

// Names of the files in the data dir.
const (
	stateFileName = "state.json"
	auditFileName = "audit.log"
	lockFileName  = "LOCK"
)

// stateFormat is the version of the state file this package writes and the
// only one it reads.
const stateFormat = 1

// stateJSON is the state file: {"format": 1, "pools": {name: poolJSON}}.
type stateJSON struct {
	Format int                 `json:"format"`
	Pools  map[string]poolJSON `json:"pools"`
}

// poolJSON is one pool in the state file. An absent weights or policy
// means never set.
type poolJSON struct {
	Weights        map[string]float64 `json:"weights,omitempty"`
	WeightsVersion uint64             `json:"weights_version"`
	Policy         *policyJSON        `json:"policy,omitempty"`
	PolicyVersion  uint64             `json:"policy_version"`
	UpdatedAt      time.Time          `json:"updated_at"`
	// Ramp is the pool's last ramp, active or ended; absent when it never
	// had one.
	Ramp *rampJSON `json:"ramp,omitempty"`
}

// encodeState returns the state file for pools: indented JSON, pools in
// name order (encoding/json sorts map keys), ending in a newline.
func encodeState(pools map[string]PoolConfig) ([]byte, error) {
	st := stateJSON{Format: stateFormat, Pools: make(map[string]poolJSON, len(pools))}
	for name, c := range pools {
		pj, err := encodePool(c)
		if err != nil {
			return nil, fmt.Errorf("pool %q: %w", name, err)
		}
		st.Pools[name] = pj
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// loadState reads the state file at path. A missing file is an empty
// store (pools empty, raw nil); any other failure wraps ErrCorruptState and
// names the file. raw is the file's content, kept to restore it byte for
// byte if a later write fails half-way.
func loadState(path string) (pools map[string]PoolConfig, raw []byte, err error) {
	raw, err = os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]PoolConfig{}, nil, nil
	}
	if err != nil {
		return nil, nil, corrupt(path, fmt.Sprintf("cannot read it: %v", err))
	}
	pools, err = decodeState(raw)
	if err != nil {
		return nil, nil, corrupt(path, err.Error())
	}
	return pools, raw, nil
}

// corrupt is the error of Open for an unusable state file.
func corrupt(path, detail string) error {
	return fmt.Errorf("%w %s: %s; fix it, or move it aside to start empty (every pool's weights and policy then start unset)",
		ErrCorruptState, path, detail)
}

// decodeState parses a state file. It checks the format before anything
// else, so that a file of a newer format is reported as such, then decodes
// strictly: an unknown field is an error, not silently dropped.
func decodeState(data []byte) (map[string]PoolConfig, error) {
	var head struct {
		Format json.RawMessage `json:"format"`
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	if err := json.Unmarshal(data, &head); err != nil {
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, err)
		}
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	if head.Format == nil {
		return nil, fmt.Errorf(`no "format" field; want {"format": %d, "pools": {...}}`, stateFormat)
	}
	var format int
	if err := json.Unmarshal(head.Format, &format); err != nil || format != stateFormat {
		return nil, fmt.Errorf("unknown format %s; this prefixroute reads format %d only (was the file written by a newer version?)",
			head.Format, stateFormat)
	}
	var st stateJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("invalid content: %v", err)
	}
	pools := make(map[string]PoolConfig, len(st.Pools))
	for _, name := range slices.Sorted(maps.Keys(st.Pools)) {
		pj := st.Pools[name]
		if err := ValidatePoolName(name); err != nil {
			return nil, err
		}
		c, err := pj.decode()
		if err != nil {
			return nil, fmt.Errorf("pool %q: %v", name, err)
		}
		pools[name] = c
	}
	return pools, nil
}

// encodePool returns c as the state file holds it.
func encodePool(c PoolConfig) (poolJSON, error) {
	pj := poolJSON{
		Weights:        c.Weights,
		WeightsVersion: c.WeightsVersion,
		PolicyVersion:  c.PolicyVersion,
		UpdatedAt:      c.UpdatedAt,
	}
	if c.Policy != nil {
		p, err := encodePolicy(*c.Policy)
		if err != nil {
			return pj, err
		}
		pj.Policy = p
	}
	if c.Ramp != nil {
		pj.Ramp = encodeRamp(c.Ramp)
	}
	return pj, nil
}

// decode checks and converts one pool of the state file.
func (pj *poolJSON) decode() (PoolConfig, error) {
	c := PoolConfig{
		WeightsVersion: pj.WeightsVersion,
		PolicyVersion:  pj.PolicyVersion,
		UpdatedAt:      pj.UpdatedAt,
	}
	if pj.Weights != nil {
		if err := ValidateWeights(pj.Weights); err != nil {
			return c, err
		}
		c.Weights = pj.Weights
	}
	if pj.Policy != nil {
		p, err := pj.Policy.decode()
		if err != nil {
			return c, fmt.Errorf("policy: %v", err)
		}
		c.Policy = &p
	}
	if pj.Ramp != nil {
		r, err := pj.Ramp.decode()
		if err != nil {
			return c, fmt.Errorf("ramp: %v", err)
		}
		c.Ramp = &r
	}
	return c, nil
}
