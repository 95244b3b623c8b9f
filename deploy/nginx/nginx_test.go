package nginx

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prefixroute/prefixroute/internal/servertest"
)

// jsModule is where Debian's libnginx-mod-http-js puts the njs module
// (nginx.conf's load_module).
const jsModule = "/usr/lib/nginx/modules/ngx_http_js_module.so"

// nginxBinary finds Debian's nginx with the njs module, or skips the test
// loudly: 'make test-deps' installs both (apt-get install nginx
// libnginx-mod-http-js), so a skip means that could not be done here.
func nginxBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			bin, err = "/usr/sbin/nginx", nil
		}
	}
	if err != nil {
		t.Skip("SKIPPED: nginx is not installed, so the nginx end-to-end test did not run. " +
			"Install it with 'make test-deps' (apt-get install nginx libnginx-mod-http-js)")
	}
	if _, err := os.Stat(jsModule); err != nil {
		t.Skipf("SKIPPED: %s is missing (Debian package libnginx-mod-http-js), so the nginx end-to-end test did not run. "+
			"Install it with 'make test-deps'", jsModule)
	}
	return bin
}

// nginxProc is one nginx running deploy/nginx's configuration in a temp
// prefix, in the foreground, listening on a loopback port of its own.
type nginxProc struct {
	t      *testing.T
	dir    string
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *servertest.SyncBuffer // nginx's stdout and stderr
}

// startNginx runs nginx.conf and prefixroute.js from this directory with
// the sidecar's HTTP address for 127.0.0.1:9090 and a free port for
// nginx's own 127.0.0.1:8080, and the edits (old, new: each old once in
// the file, a line marked "(test: ...)"). It waits until nginx
// accepts connections and stops it at the end of the test, failing the
// test if its error log holds anything at level error or worse that
// allowed does not match.
func startNginx(t *testing.T, sidecarHTTP string, allowed func(line string) bool, edits ...[2]string) *nginxProc {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	// As docs/nginx.md runs it: only logs/ made beforehand (nginx creates
	// its temp directories), -e stderr.
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile("prefixroute.js")
	if err != nil {
		t.Fatal(err)
	}
	p := &nginxProc{t: t, dir: dir, addr: servertest.DeadAddr(t), exited: make(chan struct{}), out: &servertest.SyncBuffer{}}
	conf = replaceOnce(t, conf, "server 127.0.0.1:9090;", "server "+sidecarHTTP+";")
	conf = replaceOnce(t, conf, "listen 127.0.0.1:8080;", "listen "+p.addr+";")
	for _, e := range edits {
		conf = replaceOnce(t, conf, e[0], e[1])
	}
	write(t, filepath.Join(dir, "nginx.conf"), conf)
	write(t, filepath.Join(dir, "prefixroute.js"), js)
	global := "daemon off;"
	if os.Geteuid() == 0 {
		// As root nginx would run its workers as nobody, who cannot
		// enter the test's temp dir.
		global += " user root;"
	}
	p.cmd = exec.Command(bin, "-p", dir+"/", "-e", "stderr", "-c", filepath.Join(dir, "nginx.conf"), "-g", global)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }() // its exit status is read from the error log
	t.Cleanup(func() { p.stop(allowed) })
	servertest.Eventually(t, "nginx accepts connections", func() bool {
		select {
		case <-p.exited:
			t.Fatalf("nginx exited: %s\nerror log:\n%s", p.out, p.errorLog())
		default:
		}
		c, err := net.Dial("tcp", p.addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return p
}

// stop ends nginx (SIGQUIT: graceful) and checks its error log.
func (p *nginxProc) stop(allowed func(string) bool) {
	if err := p.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		p.t.Errorf("SIGQUIT to nginx: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(servertest.DefaultTimeout):
		_ = p.cmd.Process.Kill() // the test fails just below anyway
		<-p.exited
		p.t.Errorf("nginx did not stop within %v of SIGQUIT", servertest.DefaultTimeout)
	}
	for _, line := range strings.Split(p.errorLog(), "\n") {
		if !isError(line) || (allowed != nil && allowed(line)) {
			continue
		}
		p.t.Errorf("nginx error log: %s", line)
	}
	if p.t.Failed() {
		p.t.Logf("nginx output: %s\naccess log:\n%s", p.out, p.accessLog())
	}
}

// isError reports whether an error log line is at level error or worse.
func isError(line string) bool {
	for _, lvl := range []string{"[error]", "[crit]", "[alert]", "[emerg]"} {
		if strings.Contains(line, lvl) {
			return true
		}
	}
	return false
}

func (p *nginxProc) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "logs", "error.log"))
	return string(b)
}

func (p *nginxProc) accessLog() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "logs", "access.log"))
	return string(b)
}

// url is nginx's address for path.
func (p *nginxProc) url(path string) string { return "http://" + p.addr + path }

// post sends a JSON body to nginx at path.
func (p *nginxProc) post(path, body string) (*http.Response, error) {
	return http.Post(p.url(path), "application/json", strings.NewReader(body))
}

func replaceOnce(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if n := bytes.Count(b, []byte(old)); n != 1 {
		t.Fatalf("nginx.conf has %q %d times, want once (the test replaces it)", old, n)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
