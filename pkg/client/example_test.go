package client_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"github.com/prefixroute/prefixroute/pkg/client"
	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// A gateway asks the sidecar which instance should serve each request, and
// falls back to a static list of instances when the sidecar is down. (Not
// run: it needs a sidecar.)
func ExamplePicker() {
	cc, err := client.Dial("127.0.0.1:50051")
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	picker, err := client.NewPicker(cc, client.PickerOptions{
		Pool:      "llama-3-8b",
		BlockSize: 16, // the instances' KV block size
		Fallback: []client.Endpoint{
			{InstanceID: "vllm-0", Address: "10.0.0.7:8000"},
			{InstanceID: "vllm-1", Address: "10.0.0.8:8000"},
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	tokens := []uint32{128000, 882, 25, 1202} // the prompt's token ids
	res, err := picker.Pick(context.Background(), client.Request{Tokens: tokens, RequestID: "req-1"})
	if err != nil {
		log.Fatal(err) // the sidecar said no, e.g. the pool is drained
	}
	if res.Fallback {
		log.Printf("sidecar unavailable (%v); static choice %s", res.Cause, res.Address)
	}
	log.Printf("send the request to %s (instance %s)", res.Address, res.InstanceID)
	if res.Response != nil {
		d := res.Response.GetDecision()
		log.Printf("%d of %d blocks cached there", d.GetInstances()[0].GetMatchedBlocks(), d.GetBlocks())
	}
}

// A model-server instance reports its load and KV-cache events until it
// shuts down. (Not run: it needs a sidecar.)
func ExampleReporter() {
	cc, err := client.Dial("127.0.0.1:50051")
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	queuedTokens := func() uint64 { return 0 } // from the engine's scheduler
	r, err := client.NewReporter(cc, client.ReporterOptions{
		Pool: "llama-3-8b", Deployment: "v2", InstanceID: "vllm-0", Address: "10.0.0.7:8000",
		Load: func() client.Load {
			return client.Load{QueuedPrefillTokens: queuedTokens(), KVCacheUsage: 0.42,
				KVCapacityBlocks: 16384, PrefillTokensPerSecond: 12000, BlockSizeTokens: 16}
		},
		CacheEvents: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { // ends the stream cleanly
		if err := r.Close(); err != nil {
			log.Print(err)
		}
	}()

	// The engine's KV-cache hooks: the hash of each stored or evicted block
	// is its prefixhash chain hash (parent hash, block's token ids).
	seed := prefixhash.Seed("llama-3-8b", "")
	prompt := make([]uint32, 64)
	r.Stored(prefixhash.Tokens(nil, seed, 16, prompt)...)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	<-ctx.Done()
	log.Printf("reporter stats at exit: %+v", r.Stats())
}
