package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// routerOptions is what startRouters starts.
type routerOptions struct {
	daemon     string        // prefixrouted binary
	natsServer string        // nats-server binary, started when n > 1 and natsURL is empty
	natsURL    string        // an external NATS server (JetStream on) to join instead
	n          int           // replicas
	interval   time.Duration // --report-interval
}

// routers are prefixrouted replicas running as child processes on
// loopback, joined through NATS when more than one, and the nats-server
// started for them.
type routers struct {
	daemons []*daemon
	nats    *exec.Cmd
	natsDir string
}

// startRouters starts o.n prefixrouted, each with a temporary data dir and
// no HTTP listener; with more than one, they are replicas of one cluster
// through o.natsURL or a nats-server (JetStream, a temporary store dir)
// started on a free loopback port. stop ends them all.
func startRouters(o routerOptions) (r *routers, err error) {
	r = &routers{}
	defer func() {
		if err != nil {
			r.stop()
		}
	}()
	url := o.natsURL
	if o.n > 1 && url == "" {
		if url, err = r.startNATS(o.natsServer); err != nil {
			return r, err
		}
	}
	for i := range o.n {
		dir, err := os.MkdirTemp("", "prefixload-router-")
		if err != nil {
			return r, err
		}
		args := []string{"--listen", "127.0.0.1:0", "--http-listen", "off", "--metrics-listen", "off",
			"--data-dir", filepath.Join(dir, "data"), "--log-format", "json", "--log-level", "info",
			"--report-interval", o.interval.String()}
		if o.n > 1 {
			args = append(args, "--nats", url, "--nats-name", fmt.Sprintf("prefixload-r%d", i+1))
		}
		d, err := launch(o.daemon, args, dir, false)
		if err != nil {
			return r, fmt.Errorf("router %d: %w", i+1, err)
		}
		r.daemons = append(r.daemons, d)
	}
	return r, nil
}

// startNATS runs nats-server with JetStream on a free loopback port and
// returns its client URL, read from the ports file it writes.
func (r *routers) startNATS(bin string) (string, error) {
	dir, err := os.MkdirTemp("", "prefixload-nats-")
	if err != nil {
		return "", err
	}
	r.natsDir = dir
	cmd := exec.Command(bin, "-js", "-a", "127.0.0.1", "-p", "-1", "-sd", filepath.Join(dir, "store"), "--ports_file_dir", dir)
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s (make tools installs it into ./bin): %w", bin, err)
	}
	r.nats = cmd
	file := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(bin), cmd.Process.Pid))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		var ports struct{ Nats []string }
		if json.Unmarshal(b, &ports) == nil && len(ports.Nats) > 0 {
			return ports.Nats[0], nil
		}
	}
	return "", fmt.Errorf("nats-server wrote no ports file %s within 10 s", file)
}

// addrs are the routers' gRPC addresses, the first one first.
func (r *routers) addrs() []string {
	out := make([]string, len(r.daemons))
	for i, d := range r.daemons {
		out[i] = d.addr
	}
	return out
}

// stop stops the routers, then nats-server, and removes their dirs.
func (r *routers) stop() {
	for _, d := range r.daemons {
		d.stop()
	}
	if r.nats != nil {
		if err := r.nats.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			fmt.Fprintf(os.Stderr, "prefixload: SIGTERM to nats-server: %v\n", err)
		}
		done := make(chan struct{})
		go func() {
			_ = r.nats.Wait() // its exit status after SIGTERM says nothing more
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			fmt.Fprintln(os.Stderr, "prefixload: nats-server still running 15 s after SIGTERM; killing it")
			_ = r.nats.Process.Kill() // Wait above reaps it
			<-done
		}
	}
	if r.natsDir != "" {
		if err := os.RemoveAll(r.natsDir); err != nil {
			fmt.Fprintf(os.Stderr, "prefixload: removing %s: %v\n", r.natsDir, err)
		}
	}
}
