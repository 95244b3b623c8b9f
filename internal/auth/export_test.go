package auth

import "time"

// SetTLSClock makes s read the time from now, for the tests of package
// auth_test, which move it by hand; the next check is one reload interval
// after now's present.
func SetTLSClock(s *TLSServer, now func() time.Time) {
	s.r.now = now
	s.r.next.Store(now().Add(s.r.every).UnixNano())
}
