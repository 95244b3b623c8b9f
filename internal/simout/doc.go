// Package simout turns simulator results (internal/sim) into what people
// read: the summaries (Summarise: TTFT, hit ratio, shares, the dips after
// each weight change, the slowest 1 %), the per-second series (Series),
// the Markdown tables (WriteMarkdown), the CSV files (per-second series,
// tail, readiness, the routes of a live run), the PNG plots (WritePlots)
// and all of them under one directory (WriteReport). It computes from a
// Result only; it runs nothing. Every function is safe for concurrent use
// on distinct writers; a Result is only read.
package simout
