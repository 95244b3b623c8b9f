package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// termWidth is the width tables are fitted to: a classic 80-column
// terminal, so output reads the same everywhere (and in golden files).
const termWidth = 80

// column is one table column.
type column struct {
	name string
	// right aligns the column right (numbers).
	right bool
	// shrink lets the column be truncated with "…" when the table is wider
	// than termWidth, down to min runes (names, addresses, notes).
	shrink bool
	min    int
}

// table is a plain-text table: a header row, two spaces between columns,
// no trailing spaces, and optional section lines between rows (a group's
// title, printed as is). Not safe for concurrent use.
type table struct {
	indent string
	cols   []column
	rows   []row
}

// row is a table row, or a section line when section is set.
type row struct {
	cells   []string
	section string
}

func newTable(cols ...column) *table { return &table{cols: cols} }

// textCol, numCol and nameCol make columns: plain, right-aligned (numbers),
// and shrinkable down to min runes (names).
func textCol(title string) column          { return column{name: title} }
func numCol(title string) column           { return column{name: title, right: true} }
func nameCol(title string, min int) column { return column{name: title, shrink: true, min: min} }

// add appends a row; missing cells are empty.
func (t *table) add(cells ...string) { t.rows = append(t.rows, row{cells: cells}) }

// section appends a section line.
func (t *table) section(text string) { t.rows = append(t.rows, row{section: text}) }

// widths returns each column's width, fitted to termWidth by shrinking the
// widest shrinkable column one rune at a time.
func (t *table) widths() []int {
	w := make([]int, len(t.cols))
	for i, c := range t.cols {
		w[i] = runes(c.name)
		for _, r := range t.rows {
			if i < len(r.cells) {
				w[i] = max(w[i], runes(r.cells[i]))
			}
		}
	}
	for total(t.indent, w) > termWidth {
		widest := -1
		for i, c := range t.cols {
			floor := max(c.min, runes(c.name))
			if c.shrink && w[i] > floor && (widest < 0 || w[i] > w[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		w[widest]--
	}
	return w
}

func total(indent string, w []int) int {
	n := runes(indent) + 2*(len(w)-1)
	for _, x := range w {
		n += x
	}
	return n
}

// write renders the table.
func (t *table) write(out io.Writer) {
	w := t.widths()
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString(t.indent)
		for i, c := range t.cols {
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			cell = truncate(cell, w[i])
			pad := strings.Repeat(" ", w[i]-runes(cell))
			if i > 0 {
				b.WriteString("  ")
			}
			if c.right {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
		}
		s := strings.TrimRight(b.String(), " ")
		b.Reset()
		fmt.Fprintln(out, s)
	}
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	line(names)
	for _, r := range t.rows {
		if r.cells == nil {
			fmt.Fprintln(out, t.indent+truncate(r.section, termWidth-runes(t.indent)))
			continue
		}
		line(r.cells)
	}
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// truncate cuts s to n runes, ending in "…" when it was longer.
func truncate(s string, n int) string {
	if runes(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
