package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestNewLogger checks the formats and levels the flags accept.
func TestNewLogger(t *testing.T) {
	for _, c := range []struct {
		format, level string
		ok            bool
		prefix        string // of the line logged at info
	}{
		{"text", "info", true, "time="},
		{"json", "debug", true, "{"},
		{"", "warn", true, ""},
		{"JSON", "error", true, ""},
		{"yaml", "info", false, ""},
		{"text", "loud", false, ""},
	} {
		var b bytes.Buffer
		log, err := newLogger(&b, c.format, c.level)
		if (err == nil) != c.ok {
			t.Errorf("newLogger(%q, %q): %v, want ok=%v", c.format, c.level, err, c.ok)
			continue
		}
		if err != nil {
			continue
		}
		log.Info("hello")
		if !strings.HasPrefix(b.String(), c.prefix) || (c.prefix == "") != (b.Len() == 0) {
			t.Errorf("newLogger(%q, %q) logged %q at info", c.format, c.level, b.String())
		}
	}
}
