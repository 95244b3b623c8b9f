package daemon

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestHTTPConnectionLimit: the HTTP listener, which serves picks too
// (POST /v1/route, /v1/pick), holds at most MaxConnections connections; one
// more waits to be accepted until one closes.
func TestHTTPConnectionLimit(t *testing.T) {
	d := obsStart(t, func(c *Config) { c.Transport.MaxConnections = 1 })
	first := &http.Client{Transport: &http.Transport{}}
	resp, err := first.Get("http://" + d.HTTPAddr() + "/healthz")
	must(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	must(t, err)
	resp.Body.Close() // the connection stays open, idle, for keep-alive
	second := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 300 * time.Millisecond}
	if _, err := second.Get("http://" + d.HTTPAddr() + "/healthz"); err == nil {
		t.Fatal("a second connection was served while the first was open")
	}
	first.CloseIdleConnections()
	second.Timeout = 0
	resp, err = second.Get("http://" + d.HTTPAddr() + "/healthz")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("second connection once the first closed: %d", resp.StatusCode)
	}
}
