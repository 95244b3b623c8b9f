package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// natsOptions maps the Config onto nats.go options and wires the
// connection callbacks to the link's state and counters.
func (l *Link) natsOptions() ([]nats.Option, error) {
	c := l.cfg
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(c.ReconnectWait),
		nats.ReconnectJitter(c.ReconnectJitter, c.ReconnectJitter),
		// No client-side reconnect buffer: while disconnected every publish
		// fails at once. KV writes then fail fast instead of being applied
		// after the caller was told ErrUnavailable, and events stay in the
		// link's own bounded outbox.
		nats.ReconnectBufSize(-1),
		nats.PingInterval(c.PingInterval),
		nats.MaxPingsOutstanding(2),
		nats.Timeout(c.ApplyTimeout),
		// A socket write stalled this long marks the connection dead (and
		// so reconnects) instead of holding the client's lock for the
		// default minute, which would stall KV calls past ApplyTimeout.
		nats.FlusherTimeout(c.ApplyTimeout),
		// Our own events and snapshot requests are never delivered back.
		nats.NoEcho(),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { l.setState(StateDisconnected) }),
		nats.ReconnectHandler(func(*nats.Conn) {
			l.st.reconnects.Add(1)
			l.setState(StateConnected)
			signal(l.reconnected)
			signal(l.wake)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				l.st.slowConsumer.Add(1)
			}
			l.asyncErr(err)
		}),
	}
	switch {
	case c.CredentialsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredentialsFile))
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: NKeySeedFile %q: %w", c.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLSCAFile))
	}
	if c.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(c.TLSCertFile, c.TLSKeyFile))
	}
	return opts, nil
}

func (l *Link) connect(ctx context.Context) error {
	opts, err := l.natsOptions()
	if err != nil {
		return err
	}
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(strings.Join(l.cfg.URLs, ","), opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return fmt.Errorf("%w: connect %s: %w", ErrUnavailable, strings.Join(l.cfg.URLs, ","), r.err)
		}
		l.nc = r.nc
	case <-ctx.Done():
		go func() { // close the connection if it completes after all
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return ctx.Err()
	}
	l.state.Store(int32(StateConnected))
	l.maxMsg = int(l.nc.MaxPayload()) - 8<<10
	if l.cfg.MaxBatchBytes > l.maxMsg {
		l.nc.Close()
		return fmt.Errorf("cluster config: MaxBatchBytes %d exceeds the server's max_payload %d minus 8 KiB of headroom",
			l.cfg.MaxBatchBytes, l.nc.MaxPayload())
	}
	return nil
}
