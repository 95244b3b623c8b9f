package main

import (
	"flag"
	"fmt"
	"os"

	procmode "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/prefixroute/prefixroute/frontend"
	"github.com/prefixroute/prefixroute/frontend/extproc"
	"github.com/prefixroute/prefixroute/internal/gateway"
	"github.com/prefixroute/prefixroute/internal/openai"
)

// extprocFlags are the flags of docs/envoy.md: the ext_proc endpoint picker.
type extprocFlags struct {
	listen, tls, models, modelsFile, defaultPool, poolHeader, decisionHeader, bodyMode string
	fallbacks, maxBody                                                                 int
	maxBuffered                                                                        int64
	budget                                                                             *gateway.BodyBudget // made once, shared by ext_proc and /v1/route
}

func newExtprocFlags(fs *flag.FlagSet) *extprocFlags {
	f := &extprocFlags{}
	fs.StringVar(&f.listen, "extproc-listen", "", `serve the Envoy ext_proc endpoint picker (Gateway API Inference Extension) on this address, e.g. ":9002" (off when empty)`)
	fs.StringVar(&f.tls, "extproc-tls", "daemon", "TLS of --extproc-listen: daemon (--tls-cert when set, else plaintext), plaintext, or self-signed (an ECDSA certificate made at start)")
	fs.StringVar(&f.models, "extproc-models", "", `model or LoRA adapter → pool, "m1=poolA,m2=poolA" (checked before --extproc-default-pool)`)
	fs.StringVar(&f.modelsFile, "extproc-models-file", "", "`FILE` of model=pool lines ('#' comments), added to --extproc-models")
	fs.StringVar(&f.defaultPool, "extproc-default-pool", "", "pool of a model not in --extproc-models (empty: the request's model names the pool)")
	fs.StringVar(&f.poolHeader, "extproc-pool-header", "", "request header naming the pool, over the model (off when empty)")
	fs.IntVar(&f.fallbacks, "extproc-fallbacks", extproc.DefaultFallbacks, "fallback endpoints after the chosen one, by joint probability (0: none)")
	fs.StringVar(&f.decisionHeader, "extproc-decision-header", "", `request header carrying "deployment=NAME; probability=P" to the model server (off when empty)`)
	fs.StringVar(&f.bodyMode, "extproc-body-mode", "full-duplex-streamed", "request body mode assumed when the gateway sends no protocol_config (Envoy < 1.34): full-duplex-streamed or buffered")
	fs.IntVar(&f.maxBody, "extproc-max-body-bytes", openai.DefaultMaxBodyBytes, "largest request body the endpoint picker reads, in bytes; larger is answered 413")
	fs.Int64Var(&f.maxBuffered, "max-buffered-body-bytes", gateway.DefaultBufferedBodyBytes, "request body bytes the ext_proc endpoint picker may buffer at once, all streams together; a request that would pass it is answered 503 (body_budget)")
	return f
}

// gateway is the request mapping of the flags (model map, default pool,
// pool header, body limit), shared by the ext_proc front end and the HTTP
// listener's POST /v1/route.
func (f *extprocFlags) gateway() (gateway.Config, error) {
	spec := f.models
	if f.modelsFile != "" {
		b, err := os.ReadFile(f.modelsFile)
		if err != nil {
			return gateway.Config{}, fmt.Errorf("--extproc-models-file: %w", err)
		}
		spec += "\n" + string(b)
	}
	models, err := gateway.ParseModelPools(spec)
	if err != nil {
		return gateway.Config{}, fmt.Errorf("--extproc-models: %w", err)
	}
	if f.maxBody <= 0 {
		return gateway.Config{}, fmt.Errorf("--extproc-max-body-bytes: %d; want > 0", f.maxBody)
	}
	if f.maxBuffered < int64(f.maxBody) {
		return gateway.Config{}, fmt.Errorf("--max-buffered-body-bytes: %d; want at least --extproc-max-body-bytes (%d)", f.maxBuffered, f.maxBody)
	}
	if f.budget == nil {
		f.budget = gateway.NewBodyBudget(f.maxBuffered)
	}
	return gateway.Config{ModelPools: models, DefaultPool: f.defaultPool, PoolHeader: f.poolHeader, MaxBodyBytes: f.maxBody,
		BodyBudget: f.budget}, nil
}

// frontEnd is the configured front end; its Listen is empty when
// --extproc-listen is not set.
func (f *extprocFlags) frontEnd() (frontend.GRPC, error) {
	tls, err := frontend.ParseTLSMode(f.tls)
	if err != nil {
		return frontend.GRPC{}, fmt.Errorf("--extproc-tls: %w", err)
	}
	gc, err := f.gateway()
	if err != nil {
		return frontend.GRPC{}, err
	}
	var mode procmode.ProcessingMode_BodySendMode
	switch f.bodyMode {
	case "full-duplex-streamed":
		mode = procmode.ProcessingMode_FULL_DUPLEX_STREAMED
	case "buffered":
		mode = procmode.ProcessingMode_BUFFERED
	default:
		return frontend.GRPC{}, fmt.Errorf("--extproc-body-mode: %q is not full-duplex-streamed or buffered", f.bodyMode)
	}
	if f.fallbacks < 0 {
		return frontend.GRPC{}, fmt.Errorf("--extproc-fallbacks: %d; want >= 0", f.fallbacks)
	}
	return extproc.FrontEnd(f.listen, tls, extproc.Options{
		Gateway: gc, Fallbacks: f.fallbacks, DecisionHeader: f.decisionHeader, DefaultBodyMode: mode,
	}), nil
}
