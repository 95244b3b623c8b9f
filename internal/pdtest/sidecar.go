package pdtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync/atomic"
)

// PrefillerHeader is the header the sidecar reads (llm-d's
// routing.PrefillEndpointHeader).
const PrefillerHeader = "x-prefiller-host-port"

// PrefillMaxRetries is how often the sidecar retries a prefill leg
// answered 502, 503 or 504 (llm-d's PrefillMaxRetries).
const PrefillMaxRetries = 2

// Sidecar is a stand-in of llm-d's routing sidecar on a decode pod
// (pkg/sidecar/proxy, --kv-connector nixlv2): gateways send the decode
// pod's traffic to it; without x-prefiller-host-port it passes the
// request to the local decode engine; with it (the header deleted first)
// it sends the prefill leg to that host:port — the body with
// kv_transfer_params {do_remote_decode: true, do_remote_prefill: false,
// remote_*: null}, stream false, stream_options removed, max_tokens and
// max_completion_tokens 1, a fresh X-Request-Id — then the decode leg to
// the local engine: the original body with the prefill answer's
// kv_transfer_params and the same X-Request-Id.
type Sidecar struct {
	Addr    string
	ln      net.Listener
	srv     *http.Server
	served  chan error
	decoder string

	PrefillLegs, PrefillFailures, DecodeOnly, CopyErrors atomic.Int64
}

// ListenSidecar opens the sidecar's listener (so that its address can be
// the decode engine's advertised one); Serve starts it.
func ListenSidecar() (*Sidecar, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &Sidecar{Addr: ln.Addr().String(), ln: ln}, nil
}

// Serve proxies to the decode engine at decoder.
func (s *Sidecar) Serve(decoder string) {
	s.decoder = decoder
	s.srv, s.served = serve(s.ln, http.HandlerFunc(s.serve))
}

// Close stops the sidecar and returns what failed.
func (s *Sidecar) Close() error {
	if s.srv == nil {
		s.ln.Close()
		return nil
	}
	return stop(s.srv, s.served)
}

func (s *Sidecar) serve(w http.ResponseWriter, r *http.Request) {
	prefiller := r.Header.Get(PrefillerHeader)
	r.Header.Del(PrefillerHeader)
	original, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if prefiller == "" {
		s.DecodeOnly.Add(1)
		s.forward(w, s.decoder, r.URL.Path, original, "")
		return
	}
	var req map[string]any
	if err := json.Unmarshal(original, &req); err != nil {
		http.Error(w, "invalid json: "+err.Error(), http.StatusBadRequest)
		return
	}
	var b [16]byte
	rand.Read(b[:])
	rid := hex.EncodeToString(b[:])
	stream, streamOK := req["stream"]
	opts, optsOK := req["stream_options"]
	saved := map[string]any{}
	for _, f := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := req[f]; ok {
			saved[f] = v
		}
		req[f] = 1
	}
	req["kv_transfer_params"] = map[string]any{"do_remote_decode": true, "do_remote_prefill": false,
		"remote_engine_id": nil, "remote_block_ids": nil, "remote_host": nil, "remote_port": nil}
	req["stream"] = false
	delete(req, "stream_options")
	pbody, _ := json.Marshal(req)
	var presp *http.Response
	for try := 0; ; try++ {
		presp, err = post(prefiller, r.URL.Path, pbody, rid)
		if err != nil || try == PrefillMaxRetries || (presp.StatusCode != 502 && presp.StatusCode != 503 && presp.StatusCode != 504) {
			break
		}
		presp.Body.Close()
	}
	if err != nil {
		s.PrefillFailures.Add(1)
		http.Error(w, "prefill leg: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer presp.Body.Close()
	var pout map[string]any
	if presp.StatusCode/100 != 2 || json.NewDecoder(presp.Body).Decode(&pout) != nil {
		s.PrefillFailures.Add(1)
		w.WriteHeader(presp.StatusCode)
		return
	}
	s.PrefillLegs.Add(1)
	delete(req, "stream")
	if streamOK {
		req["stream"] = stream
	}
	if optsOK {
		req["stream_options"] = opts
	}
	for _, f := range []string{"max_tokens", "max_completion_tokens"} {
		delete(req, f)
		if v, ok := saved[f]; ok {
			req[f] = v
		}
	}
	req["kv_transfer_params"] = pout["kv_transfer_params"]
	dbody, _ := json.Marshal(req)
	s.forward(w, s.decoder, r.URL.Path, dbody, rid)
}

// post sends body to http://hostport+path with X-Request-Id rid (when set).
func post(hostport, path string, body []byte, rid string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+hostport+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if rid != "" {
		req.Header.Set("X-Request-Id", rid)
	}
	return http.DefaultClient.Do(req)
}

// forward sends body to the decode engine and copies its answer to w.
func (s *Sidecar) forward(w http.ResponseWriter, hostport, path string, body []byte, rid string) {
	resp, err := post(hostport, path, body, rid)
	if err != nil {
		http.Error(w, "decode leg: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		s.CopyErrors.Add(1) // the client or the engine went away mid-answer
	}
}
