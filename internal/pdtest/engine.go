package pdtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	pb "github.com/prefixroute/prefixroute/api/prefixroute/v1"
	"github.com/prefixroute/prefixroute/pkg/client"
)

// BlockBytes is the prompt bytes of one KV block in the stand-ins: 16
// tokens of 4 bytes, the gateway's text estimate (internal/gateway).
const BlockBytes = 64

// KVTransferParams is vLLM NixlConnector's kv_transfer_params: what the
// sidecar sends with the prefill leg (do_remote_decode true, the rest
// null) and what the prefill engine answers for the decode leg (where to
// read the blocks).
type KVTransferParams struct {
	DoRemoteDecode  bool    `json:"do_remote_decode"`
	DoRemotePrefill bool    `json:"do_remote_prefill"`
	RemoteEngineID  *string `json:"remote_engine_id"`
	RemoteBlockIDs  []int   `json:"remote_block_ids"`
	RemoteHost      *string `json:"remote_host"`
	RemotePort      *int    `json:"remote_port"`
}

// completionRequest is the part of an OpenAI completions request the
// stand-ins read.
type completionRequest struct {
	Model            string            `json:"model"`
	Prompt           string            `json:"prompt"`
	MaxTokens        *int              `json:"max_tokens"`
	Stream           *bool             `json:"stream"`
	KVTransferParams *KVTransferParams `json:"kv_transfer_params"`
}

// Engine is a model-server stand-in of one role: prefill (answers only
// prefill legs, holds their blocks until a decode engine reads them) or
// decode (prefills locally, or reads the blocks a prefill engine holds).
// It reports its load and role to the router with a pkg/client Reporter.
type Engine struct {
	ID, Role string
	Addr     string // host:port it serves on

	ln    net.Listener
	srv   *http.Server
	rep   *client.Reporter
	serve chan error // Serve's result
	once  sync.Once
	err   error // Close's

	mu   sync.Mutex
	held map[string][]int // X-Request-Id → blocks a prefill leg computed, until read

	PrefillLegs, LocalPrefills, RemotePrefills atomic.Int64
}

// engineRole maps a role word to the report's.
var engineRole = map[string]pb.PdRole{"prefill": pb.PdRole_PD_ROLE_PREFILL, "decode": pb.PdRole_PD_ROLE_DECODE, "both": pb.PdRole_PD_ROLE_BOTH}

// StartEngine serves an engine of role on loopback and reports it to the
// router over cc as instance id of pool/deployment, with a prefill
// throughput of tps tokens/s (a decode engine's is its prefill rate under
// decode load: low), and address advertise (its own when ""; a decode
// engine's is its sidecar's, where gateways send its traffic).
func StartEngine(cc grpc.ClientConnInterface, pool, deployment, id, role string, tps float64, advertise string) (*Engine, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &Engine{ID: id, Role: role, Addr: ln.Addr().String(), ln: ln, held: map[string][]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", e.completions)
	mux.HandleFunc("GET /nixl/read", e.read)
	e.srv, e.serve = serve(ln, mux)
	if advertise == "" {
		advertise = e.Addr
	}
	e.rep, err = client.NewReporter(cc, client.ReporterOptions{Pool: pool, Deployment: deployment, InstanceID: id, Address: advertise,
		Load: func() client.Load {
			return client.Load{Role: engineRole[role], PrefillTokensPerSecond: tps, KVCapacityBlocks: 100000, BlockSizeTokens: 16}
		}})
	if err != nil {
		return nil, errors.Join(err, stop(e.srv, e.serve))
	}
	return e, nil
}

// serve serves h on ln; the channel gets Serve's error (nil after Close).
func serve(ln net.Listener, h http.Handler) (*http.Server, chan error) {
	srv := &http.Server{Handler: h}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	return srv, done
}

// stop closes srv and returns its Close and Serve errors.
func stop(srv *http.Server, served chan error) error {
	err := srv.Close()
	return errors.Join(err, <-served)
}

// Close stops reporting (the router sees the stream end) and serving, and
// returns what failed. Later calls return the first's result.
func (e *Engine) Close() error {
	e.once.Do(func() { e.err = errors.Join(e.rep.Close(), stop(e.srv, e.serve)) })
	return e.err
}

// completions serves one leg.
func (e *Engine) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	blocks := len(req.Prompt) / BlockBytes
	kv := req.KVTransferParams
	switch {
	case e.Role == "prefill":
		rid := r.Header.Get("X-Request-Id")
		if kv == nil || !kv.DoRemoteDecode || kv.DoRemotePrefill || req.MaxTokens == nil || *req.MaxTokens != 1 ||
			req.Stream == nil || *req.Stream || rid == "" {
			http.Error(w, "a prefill engine serves prefill legs only: kv_transfer_params.do_remote_decode true, max_tokens 1, stream false, X-Request-Id", http.StatusBadRequest)
			return
		}
		ids := make([]int, blocks)
		for i := range ids {
			ids[i] = i
		}
		e.mu.Lock()
		e.held[rid] = ids
		e.mu.Unlock()
		e.PrefillLegs.Add(1)
		host, port, _ := net.SplitHostPort(e.Addr)
		p, _ := strconv.Atoi(port)
		answer(w, "", &KVTransferParams{DoRemotePrefill: true, RemoteEngineID: &e.ID, RemoteBlockIDs: ids, RemoteHost: &host, RemotePort: &p})
	case kv != nil && kv.DoRemotePrefill:
		if err := e.pull(r.Header.Get("X-Request-Id"), kv, blocks); err != nil {
			http.Error(w, "kv transfer: "+err.Error(), http.StatusBadGateway)
			return
		}
		e.RemotePrefills.Add(1)
		answer(w, "decoded after remote prefill", nil)
	default:
		e.LocalPrefills.Add(1)
		answer(w, "decoded after local prefill", nil)
	}
}

// pull reads the blocks of request rid from the prefill engine kv names
// (NIXL's READ, over the stand-in's side channel) and checks them.
func (e *Engine) pull(rid string, kv *KVTransferParams, blocks int) error {
	if kv.RemoteHost == nil || kv.RemotePort == nil || kv.RemoteEngineID == nil {
		return errors.New("kv_transfer_params without remote_host, remote_port or remote_engine_id")
	}
	url := fmt.Sprintf("http://%s/nixl/read?request=%s", net.JoinHostPort(*kv.RemoteHost, strconv.Itoa(*kv.RemotePort)), rid)
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var got []int
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&got) != nil {
		return fmt.Errorf("read from %s: HTTP %d", *kv.RemoteEngineID, resp.StatusCode)
	}
	if len(got) != len(kv.RemoteBlockIDs) || len(got) != blocks {
		return fmt.Errorf("read %d blocks, kv_transfer_params name %d, the prompt has %d", len(got), len(kv.RemoteBlockIDs), blocks)
	}
	return nil
}

// read hands the blocks of a request to the decode engine that reads them,
// once (the prefill engine frees them after the transfer).
func (e *Engine) read(w http.ResponseWriter, r *http.Request) {
	rid := r.URL.Query().Get("request")
	e.mu.Lock()
	ids, ok := e.held[rid]
	delete(e.held, rid)
	e.mu.Unlock()
	if !ok {
		http.Error(w, "no blocks held for request "+rid, http.StatusNotFound)
		return
	}
	writeJSON(w, ids)
}

// answer writes a completion response, with kv_transfer_params when set.
func answer(w http.ResponseWriter, text string, kv *KVTransferParams) {
	out := map[string]any{"object": "text_completion", "choices": []map[string]any{{"index": 0, "text": text}}}
	if kv != nil {
		out["kv_transfer_params"] = kv
	}
	writeJSON(w, out)
}

// writeJSON answers v as JSON; a value that does not marshal is a 500.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
