package cluster

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/prefixroute/prefixroute/internal/natstest"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string // substring of the error; "" = valid
	}{
		{"zero value uses defaults", func(*Config) {}, ""},
		{"full", func(c *Config) {
			c.URLs = []string{"nats://n1:4222", "tls://n2:4222", "ws://n3:80", "wss://n4:443"}
			c.Name, c.User, c.Password = "r1", "u", "p"
			c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = "ca.pem", "c.pem", "k.pem"
			c.Bucket, c.SubjectPrefix = "my_bucket-1", "prod.prefixroute"
			c.History, c.Replicas = 10, 3
			c.FlushInterval, c.MaxBatchBytes, c.MaxPendingBytes = time.Millisecond, 64<<10, 1<<20
		}, ""},
		{"bad scheme", func(c *Config) { c.URLs = []string{"http://x:4222"} }, `URLs[0] "http://x:4222": scheme must be nats, tls, ws or wss`},
		{"no host", func(c *Config) { c.URLs = []string{"nats://"} }, "missing host"},
		{"unparsable url", func(c *Config) { c.URLs = []string{"nats://a b:1"} }, `URLs[0] "nats://a b:1"`},
		{"name newline", func(c *Config) { c.Name = "a\nb" }, "Name"},
		{"two auth methods", func(c *Config) { c.CredentialsFile, c.NKeySeedFile = "x.creds", "x.nk" }, "at most one of CredentialsFile, NKeySeedFile and User/Password"},
		{"password without user", func(c *Config) { c.Password = "p" }, "Password is set but User is empty"},
		{"cert without key", func(c *Config) { c.TLSCertFile = "c.pem" }, "TLSCertFile and TLSKeyFile must be set together"},
		{"bad bucket", func(c *Config) { c.Bucket = "a.b" }, `Bucket "a.b"`},
		{"prefix wildcard", func(c *Config) { c.SubjectPrefix = "a.*" }, `SubjectPrefix "a.*": token "*"`},
		{"prefix empty token", func(c *Config) { c.SubjectPrefix = "a..b" }, `token ""`},
		{"history too big", func(c *Config) { c.History = 65 }, "History 65: must be between 1 and 64"},
		{"history negative", func(c *Config) { c.History = -1 }, "History -1"},
		{"replicas", func(c *Config) { c.Replicas = 7 }, "Replicas 7: must be between 1 and 5"},
		{"negative flush", func(c *Config) { c.FlushInterval = -time.Millisecond }, "FlushInterval -1ms: must not be negative"},
		{"batch too small", func(c *Config) { c.MaxBatchBytes = 100 }, "MaxBatchBytes 100: must be between 1024 and 8388608"},
		{"pending below batch", func(c *Config) { c.MaxBatchBytes, c.MaxPendingBytes = 64<<10, 4<<10 }, "MaxPendingBytes 4096: must be at least MaxBatchBytes (65536)"},
		{"negative timeout", func(c *Config) { c.ApplyTimeout = -1 }, "ApplyTimeout -1ns: must not be negative"},
		{"negative reconnect", func(c *Config) { c.ReconnectWait = -1 }, "ReconnectWait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Config
			tt.mod(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// Several problems are all reported.
	err := Config{History: 100, Replicas: 9}.Validate()
	if err == nil || !strings.Contains(err.Error(), "History") || !strings.Contains(err.Error(), "Replicas") {
		t.Fatalf("joined errors: %v", err)
	}
}

// TestConfigDefaults: every zero field takes its named default, a set
// field is kept, and the defaults are consistent: valid together, within
// the bounds Validate enforces, and a default batch fits a NATS server's
// default max_payload with the 8 KiB margin MaxBatchBytes asks for.
func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	want := Config{URLs: []string{DefaultURL}, Name: c.Name, Bucket: DefaultBucket, SubjectPrefix: DefaultSubjectPrefix,
		History: DefaultHistory, Replicas: DefaultReplicas, FlushInterval: DefaultFlushInterval,
		MaxBatchBytes: DefaultMaxBatchBytes, MaxPendingBytes: DefaultMaxPendingBytes,
		ReconnectWait: DefaultReconnectWait, ReconnectJitter: DefaultReconnectJitter, PingInterval: DefaultPingInterval,
		ApplyTimeout: DefaultApplyTimeout, SnapshotTimeout: DefaultSnapshotTimeout}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	switch {
	case DefaultHistory > MaxHistory:
		t.Errorf("DefaultHistory %d above MaxHistory %d", DefaultHistory, MaxHistory)
	case DefaultMaxBatchBytes < minBatchBytes || DefaultMaxBatchBytes > server.MAX_PAYLOAD_SIZE-8<<10:
		t.Errorf("DefaultMaxBatchBytes %d: want %d..%d", DefaultMaxBatchBytes, minBatchBytes, server.MAX_PAYLOAD_SIZE-8<<10)
	case DefaultMaxPendingBytes < DefaultMaxBatchBytes:
		t.Errorf("DefaultMaxPendingBytes %d below DefaultMaxBatchBytes %d", DefaultMaxPendingBytes, DefaultMaxBatchBytes)
	case DefaultApplyTimeout > DefaultSnapshotTimeout:
		t.Errorf("DefaultApplyTimeout %v above DefaultSnapshotTimeout %v (a chunk after the first, against the first)",
			DefaultApplyTimeout, DefaultSnapshotTimeout)
	}
	// Set fields are kept; the pending bound follows a batch set above it.
	set := Config{URLs: []string{"nats://n:1"}, Name: "r1", Bucket: "b", SubjectPrefix: "s", History: 3, Replicas: 3,
		FlushInterval: time.Millisecond, MaxBatchBytes: 16 << 20, ReconnectWait: 1, ReconnectJitter: 2,
		PingInterval: 3, ApplyTimeout: 4, SnapshotTimeout: 5}
	got := set.withDefaults()
	set.MaxPendingBytes = 16 << 20
	if !reflect.DeepEqual(got, set) {
		t.Fatalf("set fields:\n got %+v\nwant %+v", got, set)
	}
	if n1, n2 := defaultName(), defaultName(); n1 == n2 || strings.Count(n1, "-") < 2 {
		t.Fatalf("default names %q, %q: want hostname-pid-random, distinct", n1, n2)
	}
}

func TestDialErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Dial(ctx, Config{History: 99}, Handlers{}); err == nil || !strings.Contains(err.Error(), "History") {
		t.Fatalf("invalid config: %v", err)
	}
	// Nothing listens on port 1.
	start := time.Now()
	_, err := Dial(ctx, Config{URLs: []string{"nats://127.0.0.1:1"}, ApplyTimeout: 500 * time.Millisecond}, Handlers{})
	if !errors.Is(err, ErrUnavailable) || time.Since(start) > 5*time.Second {
		t.Fatalf("no server: %v after %v, want ErrUnavailable", err, time.Since(start))
	}
	ns := natstest.Start(t)
	if _, err := Dial(ctx, Config{URLs: []string{ns.URL()}, NKeySeedFile: "/nonexistent"}, Handlers{}); err == nil ||
		!strings.Contains(err.Error(), "NKeySeedFile") {
		t.Fatalf("missing seed file: %v", err)
	}
	l := dial(t, testConfig(ns.URL(), "x"), Handlers{})
	l.Close()
	l.Close() // idempotent
	if err := l.Publish("p", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v", err)
	}
	if _, err := l.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if l.State() != StateClosed {
		t.Fatalf("State after Close = %v", l.State())
	}
}
