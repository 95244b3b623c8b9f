package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Message is one message of the engine's publisher.
type Message struct {
	Topic   string
	Seq     int64
	Payload []byte
}

// ErrFrame is wrapped by the errors of messages whose frames are not
// (topic, 8-byte seq, payload).
var ErrFrame = errors.New("malformed KV event message")

// parseFrames checks a message's frames: (topic, seq, payload) from the PUB
// socket, or (seq, payload) from the replay socket when topic is false.
func parseFrames(frames [][]byte, topic bool) (Message, error) {
	want := 2
	if topic {
		want = 3
	}
	if len(frames) != want {
		return Message{}, fmt.Errorf("%w: %d frames, want %d", ErrFrame, len(frames), want)
	}
	var m Message
	if topic {
		m.Topic, frames = string(frames[0]), frames[1:]
	}
	if len(frames[0]) != 8 {
		return Message{}, fmt.Errorf("%w: seq frame of %d bytes, want 8", ErrFrame, len(frames[0]))
	}
	m.Seq = int64(binary.BigEndian.Uint64(frames[0]))
	m.Payload = frames[1]
	return m, nil
}

// SubscriberOptions configures a Subscriber.
type SubscriberOptions struct {
	// Endpoint is the engine's publisher, e.g. "tcp://127.0.0.1:5557".
	Endpoint string
	// Bind makes the subscriber listen on Endpoint, for an engine whose
	// endpoint has no "*" and therefore connects.
	Bind bool
	// Topic is the topic to subscribe to; "" (the engines' default) takes
	// every message.
	Topic string
	// Retry is the wait between connection attempts. Default 200ms.
	Retry time.Duration
}

// Subscriber is a SUB socket on an engine's KV event publisher. It
// reconnects by itself when the engine restarts. Recv must be called from
// one goroutine; Close from any.
type Subscriber struct {
	sock   zmq4.Socket
	cancel context.CancelFunc
}

// Subscribe opens the socket and connects (or binds). When connecting, it
// returns at once and keeps retrying in the background until the engine
// listens or ctx ends.
func Subscribe(ctx context.Context, o SubscriberOptions) (*Subscriber, error) {
	if o.Endpoint == "" {
		return nil, errors.New("kvevents: no endpoint")
	}
	if o.Retry <= 0 {
		o.Retry = 200 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	// A listening socket must not "reconnect": zmq4 would dial its own
	// endpoint when a peer leaves.
	sock := zmq4.NewSub(ctx, zmq4.WithAutomaticReconnect(!o.Bind),
		zmq4.WithDialerRetry(o.Retry), zmq4.WithDialerMaxRetries(-1), zmq4.WithDialerTimeout(time.Second))
	if err := sock.SetOption(zmq4.OptionSubscribe, o.Topic); err != nil {
		cancel()
		_ = sock.Close() // the SetOption error is the one to return
		return nil, fmt.Errorf("kvevents: subscribe to topic %q: %w", o.Topic, err)
	}
	s := &Subscriber{sock: sock, cancel: cancel}
	if o.Bind {
		if err := sock.Listen(o.Endpoint); err != nil {
			_ = s.Close() // the Listen error is the one to return
			return nil, fmt.Errorf("kvevents: bind %s: %w", o.Endpoint, err)
		}
		return s, nil
	}
	go func() {
		// Dial retries until the engine listens or ctx ends.
		_ = sock.Dial(o.Endpoint)
	}()
	return s, nil
}

// Recv waits for the next message. A message whose frames are malformed is
// returned as an error wrapping ErrFrame (the socket stays usable); any
// other error means the socket is closed.
func (s *Subscriber) Recv() (Message, error) {
	msg, err := s.sock.Recv()
	if err != nil {
		return Message{}, err
	}
	return parseFrames(msg.Frames, true)
}

// Close closes the socket; a blocked Recv returns an error.
func (s *Subscriber) Close() error {
	s.cancel()
	return s.sock.Close()
}

// endSeq is the replay socket's end-of-replay seq.
const endSeq = -1

// Replay asks the engine's replay socket (a ROUTER at endpoint) for every
// buffered message from seq start on, calling fn for each in order, until
// the engine's end marker (seq -1). It gives up after timeout in total.
// fn's error ends the replay and is returned.
func Replay(ctx context.Context, endpoint string, start int64, timeout time.Duration, fn func(Message) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sock := zmq4.NewDealer(ctx, zmq4.WithDialerMaxRetries(0), zmq4.WithDialerTimeout(timeout))
	// Closing a DEALER that only asked and read: its error loses nothing.
	defer func() { _ = sock.Close() }()
	if err := sock.Dial(endpoint); err != nil {
		return fmt.Errorf("kvevents: replay socket %s: %w", endpoint, err)
	}
	req := make([]byte, 8)
	binary.BigEndian.PutUint64(req, uint64(start))
	// The empty frame is the delimiter a REQ socket would add: the
	// engine's ROUTER expects (identity, "", start).
	if err := sock.Send(zmq4.NewMsgFrom([]byte{}, req)); err != nil {
		return fmt.Errorf("kvevents: replay request to %s: %w", endpoint, err)
	}
	for {
		type result struct {
			msg zmq4.Msg
			err error
		}
		got := make(chan result, 1)
		go func() {
			m, err := sock.Recv()
			got <- result{m, err}
		}()
		var r result
		select {
		case r = <-got:
		case <-ctx.Done():
			return fmt.Errorf("kvevents: replay from %s: no end marker within %s: %w", endpoint, timeout, ctx.Err())
		}
		if r.err != nil {
			return fmt.Errorf("kvevents: replay from %s: %w", endpoint, r.err)
		}
		frames := r.msg.Frames
		if len(frames) > 0 && len(frames[0]) == 0 {
			frames = frames[1:] // the delimiter
		}
		m, err := parseFrames(frames, false)
		if err != nil {
			return fmt.Errorf("kvevents: replay from %s: %w", endpoint, err)
		}
		if m.Seq == endSeq {
			return nil
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}
