package servertest

import "github.com/prefixroute/prefixroute/internal/testwait"

// The waits, timeouts, DeadAddr and Clock of package testwait, under the
// harness's name: one implementation, which server's in-package tests use
// directly (they cannot import servertest).
const (
	// DefaultTimeout bounds Eventually (testwait.DefaultTimeout).
	DefaultTimeout = testwait.DefaultTimeout
	// ShortTimeout is how long Never watches (testwait.ShortTimeout).
	ShortTimeout = testwait.ShortTimeout
	// PollInterval is how often Eventually and Never look
	// (testwait.PollInterval).
	PollInterval = testwait.PollInterval
)

var (
	// Eventually is testwait.Eventually.
	Eventually = testwait.Eventually
	// EventuallyWithin is testwait.EventuallyWithin.
	EventuallyWithin = testwait.EventuallyWithin
	// EventuallyOK is testwait.EventuallyOK.
	EventuallyOK = testwait.EventuallyOK
	// Never is testwait.Never.
	Never = testwait.Never
	// DeadAddr is testwait.DeadAddr.
	DeadAddr = testwait.DeadAddr
	// NewClock is testwait.NewClock.
	NewClock = testwait.NewClock
	// Epoch is where every Clock starts (testwait.Epoch).
	Epoch = testwait.Epoch
)

// Clock is testwait.Clock, the settable clock Start gives a daemon.
type Clock = testwait.Clock

// SyncBuffer is testwait.SyncBuffer, a bytes.Buffer for concurrent writers.
type SyncBuffer = testwait.SyncBuffer
