// Package testwait is the part of the test harness that needs nothing of
// ours: Eventually, EventuallyWithin, EventuallyOK and Never with named
// timeouts (DefaultTimeout, ShortTimeout) instead of bare sleeps, DeadAddr,
// and the settable Clock a daemon under test runs on.
//
// It is a package of its own so that server's in-package tests, which
// cannot import servertest (it imports server), wait and fake time the same
// way; servertest re-exports all of it for every other test.
//
// It is for tests only; nothing in a binary imports it.
package testwait
