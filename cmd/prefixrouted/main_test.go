//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
)

// daemonProc is prefixrouted running as a subprocess.
type daemonProc struct {
	cmd        *exec.Cmd
	grpc, http string
	mu         sync.Mutex
	logs       []map[string]any
	exited     chan struct{}
}

// startDaemon builds prefixrouted into a temp dir and starts it on free
// ports (127.0.0.1:0), reading the addresses from its JSON start-up line.
func startDaemon(t *testing.T) *daemonProc {
	t.Helper()
	bin, dir := buildDaemon(t)
	return startDaemonWith(t, bin, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--log-format", "json", "--shutdown-timeout", "10s")
}

// buildDaemon builds prefixrouted into a temp dir and returns the binary
// and the dir.
func buildDaemon(t *testing.T) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "prefixrouted")
	gobin := "go" // go test puts its own GOROOT/bin first on PATH
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin, dir
}

// startDaemonWith starts bin with args, which must make it log JSON, and
// waits for its start-up line.
func startDaemonWith(t *testing.T, bin string, args ...string) *daemonProc {
	t.Helper()
	p := &daemonProc{exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("killing prefixrouted: %v", err)
			}
			<-p.exited
		}
	})
	serving := make(chan struct{})
	go p.readLogs(stderr, serving)
	select {
	case <-serving:
	case <-p.exited:
		t.Fatalf("prefixrouted exited at start: %v", p.logs)
	case <-time.After(30 * time.Second):
		t.Fatal("prefixrouted did not log its addresses")
	}
	return p
}

// readLogs collects the JSON log lines, takes the addresses from the first
// "prefixrouted serving" line, and waits for the process at EOF.
func (p *daemonProc) readLogs(r io.Reader, serving chan struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			m = map[string]any{"raw": sc.Text()}
		}
		p.mu.Lock()
		p.logs = append(p.logs, m)
		if m["msg"] == "prefixrouted serving" && p.grpc == "" {
			p.grpc, _ = m["grpc"].(string)
			p.http, _ = m["http"].(string)
			close(serving)
		}
		p.mu.Unlock()
	}
	// Wait's error is the exit status; the tests that care read it from
	// p.cmd.ProcessState after <-p.exited.
	_ = p.cmd.Wait()
	close(p.exited)
}

// pickResult is what one Pick call came back with.
type pickResult struct {
	resp *pb.PickResponse
	err  error
}

// TestSIGTERMLosesNoPick runs concurrent Picks against the real binary,
// sends SIGTERM in the middle, and checks that no Pick the router accepted
// was lost: every Pick came back with a full response, with the router's
// own Unavailable ("no eligible instance", once the instance's stream was
// ended), or with an Unavailable that shows the call never reached the
// router (refused dial, or a new stream on a draining connection). A Pick
// cut in flight (EOF, reset, "transport is closing") or timed out fails the
// test. It also checks that the report stream was ended with Unavailable
// and that the process exited 0.
func TestSIGTERMLosesNoPick(t *testing.T) {
	p := startDaemon(t)
	cc, err := grpc.NewClient(p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	pick := pb.NewPickServiceClient(cc)

	// One instance, reporting every 100 ms until the router ends its stream.
	stream, err := pb.NewLoadServiceClient(cc).ReportLoad(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first := &pb.ReportLoadRequest{Pool: "chat", Deployment: "a", InstanceId: "a-1", Address: "10.0.0.1:8000", Seq: 1, PrefillTokensPerSecond: 10000}
	if err := stream.Send(first); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first ack: %v", err)
	}
	streamEnd := make(chan error, 1)
	go func() {
		for seq := uint64(2); ; seq++ {
			if err := stream.Send(&pb.ReportLoadRequest{Seq: seq, PrefillTokensPerSecond: 10000}); err != nil {
				_, err = stream.Recv() // the status the router ended the stream with
				streamEnd <- err
				return
			}
			if _, err := stream.Recv(); err != nil {
				streamEnd <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	const workers, maxPerWorker = 8, 5000
	var sent sync.WaitGroup
	results := make([][]pickResult, workers)
	signal := make(chan struct{})
	okBefore := make(chan struct{}, workers*maxPerWorker)
	for w := range workers {
		sent.Add(1)
		go func() {
			defer sent.Done()
			unavailable := 0
			for i := range maxPerWorker {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := pick.Pick(ctx, &pb.PickRequest{Pool: "chat", PromptTokens: 64, RequestId: strconv.Itoa(w) + "-" + strconv.Itoa(i)})
				cancel()
				results[w] = append(results[w], pickResult{resp, err})
				select {
				case <-signal:
				default:
					if err == nil {
						okBefore <- struct{}{}
					}
				}
				if status.Code(err) == codes.Unavailable {
					if unavailable++; unavailable >= 20 {
						return // the router is gone
					}
				}
			}
		}()
	}
	timeout := time.After(30 * time.Second)
	for n := range 200 { // SIGTERM once 200 picks succeeded, in the middle of the stream
		select {
		case <-okBefore:
		case <-timeout:
			// Not results: the workers are still appending to it.
			t.Fatalf("only %d of 200 picks succeeded within 30 s", n)
		}
	}
	close(signal)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent.Wait()
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("prefixrouted did not exit within 20 s of SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0; logs: %v", code, p.logs)
	}

	counts := map[string]int{}
	for _, rs := range results {
		for _, r := range rs {
			switch st := status.Convert(r.err); {
			case r.err == nil && r.resp.GetAddress() == "10.0.0.1:8000" && r.resp.GetDecision() != nil && r.resp.GetInstanceId() == "a-1":
				counts["ok"]++
			case r.err == nil:
				t.Errorf("a Pick returned an incomplete response: %v", r.resp)
			case st.Code() == codes.Unavailable && strings.Contains(st.Message(), "no eligible instance"):
				counts["unavailable: instance disconnected"]++
			case st.Code() == codes.Unavailable && neverSent(st.Message()):
				counts["unavailable: not sent (router gone)"]++
			default:
				t.Errorf("a Pick failed with %v, want a response, the router's Unavailable, or an Unavailable before sending", r.err)
			}
		}
	}
	t.Logf("pick outcomes across SIGTERM: %v", counts)
	if counts["ok"] < 200 {
		t.Errorf("%d picks succeeded, want at least the 200 before SIGTERM", counts["ok"])
	}
	select {
	case err := <-streamEnd:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("report stream ended with %v, want Unavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("report stream not ended")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var stopped bool
	for _, l := range p.logs {
		if s, _ := l["msg"].(string); strings.HasPrefix(s, "shutdown timeout") {
			t.Errorf("shutdown cut calls: %v", l)
		}
		stopped = stopped || (l["msg"] == "stopped" && l["exit_code"] == float64(0))
	}
	if !stopped {
		t.Errorf("no clean stop logged: %v", p.logs)
	}
}

// neverSent reports whether a gRPC Unavailable message says the call never
// reached the server: the dial was refused, or the client had learned of
// the server's GOAWAY and did not start the stream on that connection.
func neverSent(msg string) bool {
	for _, m := range []string{"connection refused", "Error while dialing", "the connection is draining"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
