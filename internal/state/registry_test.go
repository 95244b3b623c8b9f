package state

import (
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/readiness"
)

// TestWithMigration: the registry's pools track picks over the window it
// configures, the default window without it.
func TestWithMigration(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want time.Duration
	}{
		{nil, readiness.DefaultWindow},
		{[]Option{WithMigration(readiness.Config{Window: 2 * time.Minute})}, 2 * time.Minute},
	} {
		p, err := NewRegistry(Limits{}, tc.opts...).Ensure("m")
		if err != nil {
			t.Fatal(err)
		}
		connect(t, p, t0, "a", "i", &Report{Seq: 1})
		connect(t, p, t0, "b", "j", &Report{Seq: 1})
		st, err := p.Migration(t0, readiness.Query{From: "a", To: "b"})
		if err != nil || st.Window != tc.want {
			t.Fatalf("window %v, %v; want %v", st.Window, err, tc.want)
		}
	}
}
