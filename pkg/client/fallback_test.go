package client

import (
	"fmt"
	"slices"
	"testing"
)

func endpoints(n int) []Endpoint {
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{InstanceID: fmt.Sprintf("i-%d", i), Address: fmt.Sprintf("10.0.0.%d:8000", i)}
	}
	return eps
}

// TestRendezvous: the choice depends on the key and the set only, removing
// an endpoint moves only its own keys, keys spread over every endpoint, and
// exclusions are honoured by id and address.
func TestRendezvous(t *testing.T) {
	eps := endpoints(5)
	const keys = 5000
	count := make([]int, len(eps))
	for k := range uint64(keys) {
		key := k * 0x9e3779b97f4a7c15
		i := rendezvous(eps, key, true, nil)
		count[i]++
		// Order does not matter.
		rev := slices.Clone(eps)
		slices.Reverse(rev)
		if j := rendezvous(rev, key, true, nil); rev[j] != eps[i] {
			t.Fatalf("key %x: %v forward, %v reversed", key, eps[i], rev[j])
		}
		// Removing another endpoint keeps the choice.
		other := (i + 1) % len(eps)
		without := slices.Delete(slices.Clone(eps), other, other+1)
		if j := rendezvous(without, key, true, nil); without[j] != eps[i] {
			t.Fatalf("key %x: removing %v moved it from %v to %v", key, eps[other], eps[i], without[j])
		}
		// Excluding the choice, by id or address, moves it.
		for _, ex := range []string{eps[i].InstanceID, eps[i].Address} {
			if j := rendezvous(eps, key, true, []string{ex}); j == i || j < 0 {
				t.Fatalf("key %x: excluding %q still chose %d", key, ex, j)
			}
		}
	}
	for i, n := range count {
		if n < keys/len(eps)/2 {
			t.Errorf("endpoint %d got %d of %d keys; want about %d", i, n, keys, keys/len(eps))
		}
	}
	if got := rendezvous(eps, 1, true, []string{"i-0", "i-1", "i-2", "i-3", "10.0.0.4:8000"}); got != -1 {
		t.Errorf("all excluded: %d, want -1", got)
	}
	if got := rendezvous(nil, 1, true, nil); got != -1 {
		t.Errorf("empty list: %d, want -1", got)
	}
	// Without a key the choice is random but always valid, and not always
	// the same.
	seen := map[int]bool{}
	for range 200 {
		i := rendezvous(eps, 0, false, []string{"i-0"})
		if i < 1 || i >= len(eps) {
			t.Fatalf("unkeyed: %d", i)
		}
		seen[i] = true
	}
	if len(seen) < 2 {
		t.Errorf("unkeyed choices: %v, want a spread", seen)
	}
	// Without an instance id the address is the key.
	noID := []Endpoint{{Address: "a:1"}, {Address: "b:1"}}
	if i := rendezvous(noID, 7, true, []string{"a:1"}); i != 1 {
		t.Errorf("exclude by address without id: %d", i)
	}
}
