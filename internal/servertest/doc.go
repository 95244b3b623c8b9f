// Package servertest is the shared harness of the tests that run a real
// prefixrouted: Start (a daemon on loopback with a settable Clock, a
// temporary data dir and clients of its services, shut down at the end of
// the test), Replica (the same, joined to a NATS server), Eventually and
// Never with named timeouts (DefaultTimeout, ShortTimeout) instead of bare
// sleeps, DeadAddr, and VerifyNoLeaks for TestMain. The waits, DeadAddr and
// Clock live in package testwait (which server's in-package tests import,
// as they cannot import this package) and are re-exported here.
//
// It is for tests only; nothing in a binary imports it.
package servertest
