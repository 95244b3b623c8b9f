package main

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// histogram is a cumulative Prometheus histogram: count of observations
// at or under each bound, summed over every label set.
type histogram map[float64]float64

// scrapeHistogram reads family name's buckets from the daemon's /metrics.
func scrapeHistogram(httpAddr, name string) (histogram, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	h := histogram{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	prefix := name + "_bucket{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		_, rest, ok := strings.Cut(line, `le="`)
		if !ok {
			continue
		}
		le, rest, _ := strings.Cut(rest, `"`)
		f := strings.Fields(rest)
		bound, err1 := strconv.ParseFloat(le, 64)
		if le == "+Inf" {
			bound, err1 = math.Inf(1), nil
		}
		if err1 != nil || len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			h[bound] += v
		}
	}
	return h, sc.Err()
}

// minus is the histogram of the observations made between old and h.
func (h histogram) minus(old histogram) histogram {
	out := histogram{}
	for b, v := range h {
		out[b] = v - old[b]
	}
	return out
}

// quantile estimates the q-quantile by linear interpolation inside the
// bucket holding it (the upper bound for the +Inf bucket's lower edge).
func (h histogram) quantile(q float64) time.Duration {
	bounds := make([]float64, 0, len(h))
	for b := range h {
		bounds = append(bounds, b)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 || h[bounds[len(bounds)-1]] == 0 {
		return 0
	}
	total := h[bounds[len(bounds)-1]]
	rank, lower, below := q*total, 0.0, 0.0
	for _, b := range bounds {
		if h[b] >= rank {
			if math.IsInf(b, 1) {
				return time.Duration(lower * float64(time.Second))
			}
			frac := (rank - below) / math.Max(h[b]-below, 1)
			return time.Duration((lower + frac*(b-lower)) * float64(time.Second))
		}
		lower, below = b, h[b]
	}
	return time.Duration(lower * float64(time.Second))
}
