package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prefixroute/prefixroute/internal/auth"
)

// The bearer tokens of the load test's identities.
const (
	gatewayToken  = "prefixload-gateway-token-0123456789"
	instanceToken = "prefixload-instance-token-0123456789"
)

// daemon is prefixrouted running as a child process.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	http string // the /metrics listener
	dir  string
	done chan struct{}
}

// startDaemon runs the daemon on a free loopback port with a temporary data
// dir (and tokens file) and waits for its "serving" line.
func startDaemon(c config) (*daemon, error) {
	dir, err := os.MkdirTemp("", "prefixload-")
	if err != nil {
		return nil, err
	}
	args := []string{"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--log-format", "json", "--log-level", "info",
		"--max-report-streams", strconv.Itoa(c.streams + c.streams/max(c.batch, 1) + 100), "--max-connections", strconv.Itoa(c.streams + 100),
		"--max-instances-per-pool", strconv.Itoa(max(4096, c.streams+100))}
	if c.auth {
		tokens := filepath.Join(dir, "tokens.yaml")
		body := fmt.Sprintf("identities:\n  - {name: loadgen-gateway, roles: gateway, token_sha256: %s}\n  - {name: loadgen-instances, roles: instance, token_sha256: %s}\n",
			auth.HashToken(gatewayToken), auth.HashToken(instanceToken))
		if err := os.WriteFile(tokens, []byte(body), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--tokens-file", tokens)
	}
	return launch(c.daemon, args, dir, true)
}

// launch runs bin with args (which must include --log-format json and
// --log-level info or lower) and waits for its "serving" line; stop
// removes dir. Its log lines go to stderr when echo is set, else only
// its warnings and errors.
func launch(bin string, args []string, dir string, echo bool) (*daemon, error) {
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	d := &daemon{cmd: cmd, dir: dir, done: make(chan struct{})}
	addr := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "prefixrouted serving" {
				g, _ := m["grpc"].(string)
				h, _ := m["http"].(string)
				addr <- [2]string{g, h}
				continue
			}
			if echo || m["level"] == "WARN" || m["level"] == "ERROR" {
				fmt.Fprintln(os.Stderr, "prefixrouted:", sc.Text())
			}
		}
		// Wait's error is the exit status, which d.cmd.ProcessState keeps
		// (stop and the start-up select report it from there).
		_ = cmd.Wait()
		close(d.done)
	}()
	select {
	case a := <-addr:
		d.addr, d.http = a[0], a[1]
	case <-d.done:
		_ = os.RemoveAll(dir) // best effort: it never served
		return nil, fmt.Errorf("prefixrouted exited at start: %v", cmd.ProcessState)
	case <-time.After(30 * time.Second):
		d.stop()
		return nil, fmt.Errorf("prefixrouted did not say where it serves within 30 s")
	}
	if host, _, err := net.SplitHostPort(d.addr); err != nil || !net.ParseIP(host).IsLoopback() {
		d.stop()
		return nil, fmt.Errorf("refusing to load %q: not a loopback address", d.addr)
	}
	return d, nil
}

// memory returns the daemon's peak and current resident set, in KiB, from
// /proc/PID/status.
func (d *daemon) memory() (hwm, rss int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "VmHWM:" || f[0] == "VmRSS:") {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "VmHWM:" {
				hwm = v
			} else {
				rss = v
			}
		}
	}
	return hwm, rss
}

// cpu returns the daemon's user+system CPU time so far, from
// /proc/PID/stat.
func (d *daemon) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return -1
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// stop sends SIGTERM, waits up to 15 s (then kills) and removes the data
// dir.
func (d *daemon) stop() {
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		fmt.Fprintf(os.Stderr, "prefixload: SIGTERM to prefixrouted: %v\n", err)
	}
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		fmt.Fprintln(os.Stderr, "prefixload: prefixrouted still running 15 s after SIGTERM; killing it")
		if err := d.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			fmt.Fprintf(os.Stderr, "prefixload: killing prefixrouted: %v\n", err)
		}
		<-d.done
	}
	if err := os.RemoveAll(d.dir); err != nil {
		fmt.Fprintf(os.Stderr, "prefixload: removing the daemon's data dir: %v\n", err)
	}
}
