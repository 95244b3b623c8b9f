package client

import (
	"math/rand/v2"
	"slices"

	"github.com/zeebo/xxh3"
)

// Endpoint is one instance of a Picker's static fallback list.
//
// When the sidecar cannot answer, Pick chooses among the endpoints not
// excluded by the request by rendezvous (highest-random-weight) hashing of
// the request's first block hash: every endpoint gets the score
// XXH3_64(seed = first block hash, InstanceID, or Address when InstanceID is
// empty), and the highest score wins. So:
//
//   - requests that share their first block (the same system prompt, the
//     same conversation) go to the same endpoint, from every gateway process
//     with the same list, which keeps some prefix-cache affinity while the
//     sidecar is away;
//   - removing an endpoint from the list only moves the requests that went
//     to it; the order of the list does not matter;
//   - a prompt shorter than one block (no hashes) goes to a uniformly random
//     endpoint, so short prompts do not pile onto one instance.
//
// The fallback knows nothing of load, weights or draining: it is a way to
// keep serving, not a scheduler.
type Endpoint struct {
	// InstanceID names the instance; it is also the rendezvous key and what
	// Request.Exclude matches. Optional: Address is used when empty.
	InstanceID string
	// Address is what the gateway connects to. Required.
	Address string
	// Deployment is copied to Result.Deployment.
	Deployment string
}

// key is the endpoint's rendezvous key.
func (e *Endpoint) key() string {
	if e.InstanceID != "" {
		return e.InstanceID
	}
	return e.Address
}

// rendezvous returns the index of the endpoint with the highest score for
// key among those whose id and address are not in exclude, or -1 when every
// endpoint is excluded. Without a key (keyed false) it draws one at random.
func rendezvous(eps []Endpoint, key uint64, keyed bool, exclude []string) int {
	if !keyed {
		key = rand.Uint64()
	}
	best, bestScore := -1, uint64(0)
	for i := range eps {
		e := &eps[i]
		if slices.Contains(exclude, e.Address) || (e.InstanceID != "" && slices.Contains(exclude, e.InstanceID)) {
			continue
		}
		score := xxh3.HashStringSeed(e.key(), key)
		if best < 0 || score > bestScore || (score == bestScore && e.key() < eps[best].key()) {
			best, bestScore = i, score
		}
	}
	return best
}
