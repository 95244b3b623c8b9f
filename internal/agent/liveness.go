package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// DefaultKVEventsSilentAfter is how long an agent with KV events configured
// waits for the first message before it warns that none arrives (a wrong
// endpoint or port, or an engine started without KV events): 60 s.
const DefaultKVEventsSilentAfter = 60 * time.Second

// livezStall is how long the scrape loop may go without a turn before
// /livez fails: every turn is bounded by ScrapeInterval plus the HTTP
// client's timeout (EngineTimeout/2 by default), so only a stuck agent
// misses it.
const livezStall = 30 * time.Second

// alive says why the agent is not live, or "": its Run must be running and
// its scrape loop must have turned within livezStall (plus ScrapeInterval
// and EngineTimeout). Neither the engine's health nor the router's
// reachability enters: a router outage never restarts the agent.
func (a *Agent) alive(now time.Time) string {
	if !a.running.Load() {
		return "not running"
	}
	stall := livezStall + a.cfg.ScrapeInterval + a.cfg.EngineTimeout
	if t := a.turn.Load(); t != 0 && now.Sub(time.Unix(0, t)) > stall {
		return fmt.Sprintf("the scrape loop has not turned for %s", now.Sub(time.Unix(0, t)).Round(time.Second))
	}
	return ""
}

// kvReceived notes a KV event message (live or replayed). The first one
// ends a silence warning. Cheap after the first: one atomic load.
func (a *Agent) kvReceived() {
	if a.kvSeen.Load() {
		return
	}
	a.kvMu.Lock()
	defer a.kvMu.Unlock()
	a.kvSeen.Store(true)
	if a.kvSilent {
		a.kvSilent = false
		a.m.kvSilent.Set(0)
		a.log.Info("prefixagent: first KV event message received; precise routing can start", "endpoint", a.cfg.KVEvents)
	}
}

// watchSilence warns once when no KV event message has arrived
// KVEventsSilentAfter after start: a WARN naming the endpoint, the
// prefixagent_kv_events_silent gauge at 1 and /status's kv_events_silent.
func (a *Agent) watchSilence(ctx context.Context) {
	t := time.NewTimer(a.cfg.KVEventsSilentAfter)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	a.kvMu.Lock()
	defer a.kvMu.Unlock()
	if a.kvSeen.Load() {
		return
	}
	a.kvSilent = true
	a.m.kvSilent.Set(1)
	a.log.Warn("prefixagent: no KV event message received; the router guesses this instance's cache (precise routing off). "+
		"Check that --kv-events names the engine's publisher endpoint and port and that the engine publishes KV events",
		"endpoint", a.cfg.KVEvents, "after", a.cfg.KVEventsSilentAfter.String())
}

// Status is what GET /status reports about one agent.
type Status struct {
	InstanceID      string `json:"instance_id"`
	Live            bool   `json:"live"`
	EngineUp        bool   `json:"engine_up"`
	RouterConnected bool   `json:"router_connected"`
	CachePrecise    bool   `json:"cache_precise"`
	// KVEvents is the configured publisher endpoint ("" when load only).
	KVEvents string `json:"kv_events,omitempty"`
	// KVEventsSeen: a KV event message has arrived since start.
	KVEventsSeen bool `json:"kv_events_seen"`
	// KVEventsSilent: KV events are configured and none arrived within
	// KVEventsSilentAfter of start.
	KVEventsSilent bool `json:"kv_events_silent"`
	// Problems says, in words, what is wrong; empty when nothing is.
	Problems []string `json:"problems"`
}

// Status returns the agent's state for GET /status.
func (a *Agent) Status() Status {
	a.mu.Lock()
	rep, exact := a.rep, a.exact
	a.mu.Unlock()
	a.kvMu.Lock()
	silent := a.kvSilent
	a.kvMu.Unlock()
	s := Status{InstanceID: a.cfg.InstanceID, Live: a.alive(time.Now()) == "", EngineUp: a.engineUp(),
		RouterConnected: rep != nil && rep.Stats().Connected, CachePrecise: exact,
		KVEvents: a.cfg.KVEvents, KVEventsSeen: a.kvSeen.Load(), KVEventsSilent: silent, Problems: []string{}}
	if why := a.alive(time.Now()); why != "" {
		s.Problems = append(s.Problems, why)
	}
	if why := a.healthy(); why != "" {
		s.Problems = append(s.Problems, why)
	}
	if silent {
		s.Problems = append(s.Problems, fmt.Sprintf("no KV event message from %s in the %s since start: precise routing is off", a.cfg.KVEvents, a.cfg.KVEventsSilentAfter))
	}
	return s
}

// livezHandler is GET /livez: 200 "ok" while every agent runs, else 503
// with a JSON error naming each that does not.
func livezHandler(agents []*Agent) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var why []string
		now := time.Now()
		for _, a := range agents {
			if w := a.alive(now); w != "" {
				why = append(why, a.cfg.InstanceID+": "+w)
			}
		}
		if len(why) > 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": strings.Join(why, "; ")})
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

// statusHandler is GET /status: the Status of every agent as a JSON
// object {"agents": [...]}, always 200.
func statusHandler(agents []*Agent) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		out := struct {
			Agents []Status `json:"agents"`
		}{}
		for _, a := range agents {
			out.Agents = append(out.Agents, a.Status())
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}
