package decisionlog

import "testing"

// TestRecentLines: the ring keeps the latest maxRecent lines and
// returns a pool's newest first.
func TestRecentLines(t *testing.T) {
	var r recentLines
	for i := range maxRecent + 3 {
		pool := "a"
		if i%2 == 1 {
			pool = "b"
		}
		r.add(pool, []byte{byte(i)})
	}
	// lines 3..66 are held; b's are the odd ones, 3..65
	got := r.of("b")
	if len(got) != maxRecent/2 || got[0][0] != maxRecent+1 || got[len(got)-1][0] != 3 {
		t.Errorf("%d lines of b, newest %d, oldest %d; want %d, %d, 3", len(got), got[0][0], got[len(got)-1][0],
			maxRecent/2, maxRecent+1)
	}
	if n := len(r.of("c")); n != 0 {
		t.Errorf("%d lines of a pool never logged", n)
	}
}
