package agent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prefixroute/prefixroute/internal/enginemetrics"
	"github.com/prefixroute/prefixroute/internal/kvalign"
)

// scrapeLoop scrapes the engine every ScrapeInterval until ctx ends. It
// fails only when the engine's block size contradicts the pool's, or its
// role the configured one (ErrRole).
func (a *Agent) scrapeLoop(ctx context.Context) error {
	t := time.NewTicker(a.cfg.ScrapeInterval)
	defer t.Stop()
	failing := false
	for {
		a.turn.Store(time.Now().UnixNano())
		s, err := a.scrape(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			a.m.scrapeErrors.Inc()
			if !failing {
				a.log.Warn("prefixagent: engine metrics scrape failed", "url", a.cfg.MetricsURL, "err", err)
			}
			failing = true
		} else {
			if failing {
				a.log.Info("prefixagent: engine metrics scrape works again", "url", a.cfg.MetricsURL)
			}
			failing = false
			if err := a.took(s, time.Now()); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scrape fetches and parses one /metrics page.
func (a *Agent) scrape(ctx context.Context) (enginemetrics.Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.MetricsURL, nil)
	if err != nil {
		return enginemetrics.Sample{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return enginemetrics.Sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return enginemetrics.Sample{}, fmt.Errorf("GET %s: HTTP %d", a.cfg.MetricsURL, resp.StatusCode)
	}
	return enginemetrics.Parse(a.cfg.Engine, resp.Body)
}

// took applies one good sample: the load to report, and the block size and
// capacity the aligner needs.
func (a *Agent) took(s enginemetrics.Sample, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.BlockSize != 0 && a.cfg.BlockSize != 0 && s.BlockSize != uint64(a.cfg.BlockSize) {
		return fmt.Errorf("%w: the engine's cache_config_info has block size %d tokens, the pool's block size is %d tokens (--block-size); "+
			"start the engine with --block-size %d (vLLM) / --page-size %d (SGLang) or the agent with --block-size %d",
			kvalign.ErrBlockSize, s.BlockSize, a.cfg.BlockSize, a.cfg.BlockSize, a.cfg.BlockSize, s.BlockSize)
	}
	role, err := resolveRole(a.cfg.Role, s.Role)
	if err != nil {
		return err
	}
	l := a.est.Add(s, now)
	l.Role = role
	if a.al == nil {
		bs := a.cfg.BlockSize
		if bs == 0 {
			bs = int(s.BlockSize)
		}
		if bs > 0 {
			maxBlocks := a.cfg.MaxBlocks
			if maxBlocks == 0 {
				maxBlocks = DefaultMaxBlocks
				if s.CapacityBlocks > 0 {
					maxBlocks = int(min(2*s.CapacityBlocks, 1<<30))
				}
			}
			a.al = kvalign.New(a.seed, bs, maxBlocks)
			a.blkOnce.Do(func() { close(a.blk) })
		}
	}
	if l.BlockSizeTokens == 0 && a.al != nil {
		l.BlockSizeTokens = uint32(a.al.BlockSize())
	}
	a.load = l
	a.lastOK.Store(now.UnixNano())
	a.m.waiting.Set(float64(l.WaitingRequests))
	a.m.queueMs.Set(l.QueueMs)
	return nil
}
