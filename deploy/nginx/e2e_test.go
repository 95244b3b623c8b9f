package nginx

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/prefixroute/prefixroute/internal/servertest"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// chat is an OpenAI chat completion body for model with a system and a
// user message (no system message when system is "").
func chat(model, system, user string, stream bool) string {
	var msgs []map[string]string
	if system != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": system})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": user})
	b, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "stream": stream})
	return string(b)
}

// fleet is a sidecar, stand-ins reporting to it, and nginx in front.
type fleet struct {
	t       *testing.T
	sidecar *servertest.Sidecar
	nginx   *nginxProc
	ins     map[string]*standIn
}

func TestSmoke(t *testing.T) {
	nginxBinary(t)
	sc := servertest.Start(t, servertest.RealClock())
	cc, err := client.Dial(sc.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	a := newStandIn(t, cc, "chat", "d", "a-1")
	b := newStandIn(t, cc, "chat", "d", "b-1")
	_ = a
	_ = b
	ng := startNginx(t, sc.HTTPAddr(), nil)
	servertest.Eventually(t, "routed", func() bool {
		resp, err := ng.post("/v1/chat/completions", chat("chat", "", "hello", false))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%d %v %s", resp.StatusCode, resp.Header, body)
		return resp.StatusCode == http.StatusOK
	})
	t.Log(ng.accessLog())
	t.Log(ng.errorLog())
}
