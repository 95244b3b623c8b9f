package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Defaults applied by Config for zero-valued fields.
const (
	DefaultURL             = "nats://127.0.0.1:4222"
	DefaultBucket          = "prefixroute"
	DefaultSubjectPrefix   = "prefixroute"
	DefaultHistory         = 64
	DefaultReplicas        = 1
	DefaultFlushInterval   = 2 * time.Millisecond
	DefaultMaxBatchBytes   = 256 << 10
	DefaultMaxPendingBytes = 8 << 20
	DefaultReconnectWait   = 250 * time.Millisecond
	DefaultReconnectJitter = 100 * time.Millisecond
	DefaultPingInterval    = 10 * time.Second
	DefaultApplyTimeout    = 2 * time.Second
	DefaultSnapshotTimeout = 30 * time.Second

	// MaxHistory is the largest History JetStream KV accepts.
	MaxHistory = 64
	// minBatchBytes keeps batches useful; maxBatchBytes keeps them below
	// any sane server max_payload (checked against the real one at Dial).
	minBatchBytes = 1 << 10
	maxBatchBytes = 8 << 20
)

// Config configures a Link. The zero value of every field selects the
// default named in its comment; Validate reports what is wrong with the
// rest. A Config is a plain value: copy it freely, it is not retained
// by Dial after the defaults are applied.
type Config struct {
	// URLs lists NATS server URLs (nats://, tls://, ws://, wss://), all of
	// the same cluster. Default: ["nats://127.0.0.1:4222"].
	URLs []string
	// Name identifies this replica: it is the origin header of every
	// event batch and snapshot, and events carrying it are dropped on
	// receipt. It must be unique per running replica. Default:
	// "<hostname>-<pid>-<6 random hex digits>".
	Name string

	// CredentialsFile is a NATS .creds file (JWT + seed). At most one of
	// CredentialsFile, NKeySeedFile and User/Password may be set. Default: none.
	CredentialsFile string
	// NKeySeedFile is a file holding an NKey user seed. Default: none.
	NKeySeedFile string
	// User and Password authenticate with a user name and password.
	// Password requires User. Default: none.
	User     string
	Password string

	// TLSCAFile is a PEM bundle used to verify the server. Default: system roots.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the client certificate and key for
	// mutual TLS; set both or neither. Default: none.
	TLSCertFile string
	TLSKeyFile  string

	// Bucket is the JetStream KV bucket holding the shared configuration.
	// It is created at Dial if missing (an existing bucket keeps its own
	// settings). Letters, digits, '-' and '_'. Default: "prefixroute".
	Bucket string
	// SubjectPrefix is prepended to every core NATS subject the link uses
	// ("<prefix>.events.<pool-token>", "<prefix>.snapshot.<pool-token>").
	// Dot-separated tokens without wildcards or spaces. Default: "prefixroute".
	SubjectPrefix string
	// History is how many revisions per key the bucket keeps (the audit
	// trail), 1..64. Used only when Dial creates the bucket. Default: 64.
	History int
	// Replicas is the bucket's JetStream replication factor, 1..5. Used
	// only when Dial creates the bucket. Default: 1.
	Replicas int

	// FlushInterval is the longest an event waits in a batch before the
	// batch is sent. Default: 2ms.
	FlushInterval time.Duration
	// MaxBatchBytes caps one batch message (framing included); a fuller
	// batch is sent at once. 1 KiB..8 MiB and below the server's
	// max_payload minus 8 KiB. Default: 256 KiB.
	MaxBatchBytes int
	// MaxPendingBytes bounds the outgoing event buffer (sealed batches not
	// yet handed to NATS). When full, the oldest batches are dropped and
	// counted. At least MaxBatchBytes. Default: 8 MiB.
	MaxPendingBytes int

	// ReconnectWait is the pause between reconnect attempts. Default: 250ms.
	ReconnectWait time.Duration
	// ReconnectJitter is the random extra added to ReconnectWait (also for
	// TLS). Default: 100ms.
	ReconnectJitter time.Duration
	// PingInterval is how often the client pings the server; two missed
	// pongs mark the connection dead. Default: 10s.
	PingInterval time.Duration
	// ApplyTimeout bounds every KV operation, the connect at Dial and each
	// snapshot chunk after the first; a socket write stalled this long
	// drops the connection (which then reconnects). Default: 2s.
	ApplyTimeout time.Duration
	// SnapshotTimeout bounds the wait for a snapshot's first chunk, which
	// includes the answering replica exporting its whole view (about 1.4 s
	// for 200,000 blocks under the race detector). Default: 30s.
	SnapshotTimeout time.Duration
}

var (
	bucketRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	// subjectTokenRE is deliberately stricter than NATS requires, so that
	// prefixes are safe in every tool and ACL file.
	subjectTokenRE = regexp.MustCompile(`^[a-zA-Z0-9_$-]+$`)
)

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if len(c.URLs) == 0 {
		c.URLs = []string{DefaultURL}
	}
	if c.Name == "" {
		c.Name = defaultName()
	}
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = DefaultSubjectPrefix
	}
	setDefault(&c.History, DefaultHistory)
	setDefault(&c.Replicas, DefaultReplicas)
	setDefault(&c.MaxBatchBytes, DefaultMaxBatchBytes)
	setDefault(&c.MaxPendingBytes, max(DefaultMaxPendingBytes, c.MaxBatchBytes))
	setDefault(&c.FlushInterval, DefaultFlushInterval)
	setDefault(&c.ReconnectWait, DefaultReconnectWait)
	setDefault(&c.ReconnectJitter, DefaultReconnectJitter)
	setDefault(&c.PingInterval, DefaultPingInterval)
	setDefault(&c.ApplyTimeout, DefaultApplyTimeout)
	setDefault(&c.SnapshotTimeout, DefaultSnapshotTimeout)
	return c
}

func setDefault[T int | time.Duration](p *T, def T) {
	if *p == 0 {
		*p = def
	}
}

func defaultName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "prefixrouted"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	host = strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, host)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Validate reports every problem in c (after defaults are applied to zero
// fields), joined into one error, or nil when Dial would accept it.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("cluster config: "+format, args...))
	}
	for i, raw := range c.URLs {
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			bad("URLs[%d] %q: %v", i, raw, err)
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			bad("URLs[%d] %q: scheme must be nats, tls, ws or wss", i, raw)
		case u.Host == "":
			bad("URLs[%d] %q: missing host", i, raw)
		}
	}
	if strings.ContainsAny(c.Name, "\r\n") || len(c.Name) > 256 {
		bad("Name %q: must be at most 256 bytes without line breaks", c.Name)
	}
	auth := 0
	for _, set := range []bool{c.CredentialsFile != "", c.NKeySeedFile != "", c.User != ""} {
		if set {
			auth++
		}
	}
	if auth > 1 {
		bad("set at most one of CredentialsFile, NKeySeedFile and User/Password")
	}
	if c.Password != "" && c.User == "" {
		bad("Password is set but User is empty")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("TLSCertFile and TLSKeyFile must be set together")
	}
	if !bucketRE.MatchString(c.Bucket) {
		bad("Bucket %q: only letters, digits, '-' and '_' are allowed", c.Bucket)
	}
	for _, tok := range strings.Split(c.SubjectPrefix, ".") {
		if !subjectTokenRE.MatchString(tok) {
			bad("SubjectPrefix %q: token %q must be non-empty letters, digits, '-', '_' or '$'", c.SubjectPrefix, tok)
			break
		}
	}
	if c.History < 1 || c.History > MaxHistory {
		bad("History %d: must be between 1 and %d", c.History, MaxHistory)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad("Replicas %d: must be between 1 and 5", c.Replicas)
	}
	if c.FlushInterval < 0 {
		bad("FlushInterval %v: must not be negative", c.FlushInterval)
	}
	if c.MaxBatchBytes < minBatchBytes || c.MaxBatchBytes > maxBatchBytes {
		bad("MaxBatchBytes %d: must be between %d and %d", c.MaxBatchBytes, minBatchBytes, maxBatchBytes)
	}
	if c.MaxPendingBytes < c.MaxBatchBytes {
		bad("MaxPendingBytes %d: must be at least MaxBatchBytes (%d)", c.MaxPendingBytes, c.MaxBatchBytes)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ReconnectWait", c.ReconnectWait}, {"ReconnectJitter", c.ReconnectJitter}, {"PingInterval", c.PingInterval}, {"ApplyTimeout", c.ApplyTimeout}, {"SnapshotTimeout", c.SnapshotTimeout}} {
		if d.v < 0 {
			bad("%s %v: must not be negative", d.name, d.v)
		}
	}
	return errors.Join(errs...)
}

// WithDefaults returns c with every zero field set to its default, as Dial
// uses it.
func (c Config) WithDefaults() Config { return c.withDefaults() }
