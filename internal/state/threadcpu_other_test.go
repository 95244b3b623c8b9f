//go:build !linux

package state

import "time"

// threadCPU is not available here: ok false.
func threadCPU() (time.Duration, bool) { return 0, false }
