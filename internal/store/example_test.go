package store_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/prefixroute/prefixroute/internal/store"
)

func ExampleStore_SetWeights() {
	dir, err := os.MkdirTemp("", "store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			log.Print(err)
		}
	}()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			log.Print(err)
		}
	}()

	// Start a canary: 1:9, unconditionally.
	c, err := s.SetWeights("chat", map[string]float64{"old": 9, "new": 1}, 0, "alice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.WeightsVersion, c.Weights)

	// Cut over, only if nobody changed the weights since version 1.
	c, err = s.SetWeights("chat", map[string]float64{"old": 0, "new": 1}, c.WeightsVersion, "alice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.WeightsVersion, c.Weights)

	// A second operator still holding version 1 is refused.
	_, err = s.SetWeights("chat", map[string]float64{"old": 1, "new": 1}, 1, "bob")
	fmt.Println(errors.Is(err, store.ErrVersionMismatch), err)
	// Output:
	// 1 map[new:1 old:9]
	// 2 map[new:1 old:0]
	// true version mismatch: pool "chat": expected_version 1, current 2; read the weights again and retry
}
