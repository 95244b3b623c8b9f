package readiness

import (
	"encoding/binary"
	"math/bits"

	"github.com/axiomhq/hyperloglog"
)

// The distinct-block counts are HyperLogLog sketches of
// github.com/axiomhq/hyperloglog, kept as bare dense registers: the tracker
// updates the registers itself and hands the merged registers of the window
// to the library (UnmarshalBinary, then Estimate) at Status time. Why not a
// *hyperloglog.Sketch per bucket and pair:
//
//   - the sparse representation allocates on the hot path: re-inserting
//     hashes already merged into its sparse list refills its temporary set
//     and forces a merge that builds a new list (measured: 256 repeated
//     hashes, 49 µs and 18 allocations);
//   - the dense Sketch.InsertHash is a call per hash that is not inlined
//     (7.7 ns/hash, 2 µs for a 256-block prefix), against 1.4 ns/hash for
//     the loop below.
//
// insertRegs is exactly the library's dense InsertHash on an already uniform
// 64-bit hash (its getPosVal: register index = the top p bits, value = the
// leading zeros of the rest + 1, capped by a guard bit), which the version 2
// dense binary format pins; TestSketchMatchesLibrary checks the estimates
// agree. The block hashes are uniform xxh3 values, so they are inserted
// without rehashing.

// insertRegs adds every hash of hs to the 2^p dense registers regs.
func insertRegs(regs []uint8, p uint8, hs []uint64) {
	shift := 64 - p
	guard := uint64(1) << (p - 1)
	for _, x := range hs {
		i := x >> shift
		rho := uint8(bits.LeadingZeros64(x<<p|guard)) + 1
		if i < uint64(len(regs)) && rho > regs[i] {
			regs[i] = rho
		}
	}
}

// sketchSink is one pair (a, b) of a Record: the column b of a's
// interleaved registers (Tracker.regs) and the first block it takes.
type sketchSink struct {
	col, from int
}

// insertPairs does, for every sink k, insertRegs on column k.col of blk
// (2^p rows of stride bytes, stride a power of two ≤ 64; register i of the
// column at byte i*stride+col) with hs[k.from:] (each from in [0,
// len(hs)], each col < stride; sinks is reordered). The sinks taking a
// block are updated together: up to 3 a byte each (insertColumn), more
// eight columns a word at a time (insertRow; a row of fewer than 8 lies in
// one word). The union being a max, every column ends as insertRegs leaves
// its registers alone. Registers and values are at most 64−p+1 < 128, so
// (a|0x80)−b never borrows across bytes (as in maxRegs).
func insertPairs(blk []uint8, stride int, p uint8, hs []uint64, sinks []sketchSink) {
	// By from, descending (insertion sort: fewer than MaxDeployments
	// sinks), so that hs[sinks[q].from:sinks[q-1].from] goes to sinks[q:].
	for i := 1; i < len(sinks); i++ {
		for j := i; j > 0 && sinks[j].from > sinks[j-1].from; j-- {
			sinks[j], sinks[j-1] = sinks[j-1], sinks[j]
		}
	}
	var mask [MaxMaxDeployments / 8]uint64 // the columns taking the segment
	for q := len(sinks) - 1; q >= 0; q-- {
		c := sinks[q].col
		mask[c/8] |= 0xff << (8 * (c % 8))
		lo, end := sinks[q].from, len(hs)
		if q > 0 {
			end = sinks[q-1].from
		}
		if lo >= end {
			continue
		}
		if len(sinks)-q <= 3 {
			// Few columns: a byte each costs fewer instructions than a word.
			for _, k := range sinks[q:] {
				insertColumn(blk, stride, k.col, p, hs[lo:end])
			}
			continue
		}
		if stride <= 8 {
			insertRow(blk, stride, p, hs[lo:end], mask[0])
			continue
		}
		insertRows(blk, stride, p, hs[lo:end], mask[:stride/8])
	}
}

// insertRows is insertRow on word w of every row (rows of stride ≥ 8
// bytes, a power of two) with the mask masks[w], for every w, in one pass
// over hs: each hash's register and value are computed once for all the
// words of its row (a 16-deployment tracker has two).
func insertRows(blk []uint8, stride int, p uint8, hs []uint64, masks []uint64) {
	const lsb, hi = 0x0101010101010101, 0x8080808080808080
	shift := (64 - p) & 63
	guard := uint64(1) << ((p - 1) & 63)
	for _, x := range hs {
		at := int(x>>shift) * stride // the row's first byte, word aligned
		r := uint64(uint8(bits.LeadingZeros64(x<<(p&63)|guard))+1) * lsb
		row := blk[at : at+8*len(masks)]
		for w, m := range masks {
			if m == 0 {
				continue
			}
			v := binary.LittleEndian.Uint64(row[8*w:])
			ge := (((v | hi) - r) & hi) >> 7 * 0xff // 0xff in each byte where v ≥ r
			if nv := v&(ge|^m) | r&^ge&m; nv != v {
				binary.LittleEndian.PutUint64(row[8*w:], nv)
			}
		}
	}
}

// insertColumn does insertRegs on column col of blk (rows of stride
// bytes) with every hash of hs.
func insertColumn(blk []uint8, stride, col int, p uint8, hs []uint64) {
	shift := (64 - p) & 63
	guard := uint64(1) << ((p - 1) & 63)
	for _, x := range hs {
		at := int(x>>shift)*stride + col
		rho := uint8(bits.LeadingZeros64(x<<(p&63)|guard)) + 1
		if at < len(blk) && rho > blk[at] {
			blk[at] = rho
		}
	}
}

// insertRow does insertRegs on the columns of blk (rows of stride bytes,
// a power of two) set in the word mask m, a row's first 8 bytes (or all of
// a shorter row, inside its word, at the row's offset), with every hash of
// hs.
func insertRow(blk []uint8, stride int, p uint8, hs []uint64, m uint64) {
	const lsb, hi = 0x0101010101010101, 0x8080808080808080
	shift := (64 - p) & 63
	guard := uint64(1) << ((p - 1) & 63)
	for _, x := range hs {
		at := int(x>>shift) * stride // the row's first byte
		off := at &^ 7
		mw := m << ((uint(at) & 7) << 3)
		r := uint64(uint8(bits.LeadingZeros64(x<<(p&63)|guard))+1) * lsb
		v := binary.LittleEndian.Uint64(blk[off:])
		ge := (((v | hi) - r) & hi) >> 7 * 0xff // 0xff in each byte where v ≥ r
		if nv := v&(ge|^mw) | r&^ge&mw; nv != v {
			binary.LittleEndian.PutUint64(blk[off:], nv)
		}
	}
}

// maxColumn sets dst[i] = max(dst[i], blk[i*stride+col]) for every
// register i of dst: the union of dst with column col of interleaved
// registers (insertPairs).
func maxColumn(dst, blk []uint8, stride, col int) {
	for i := range dst {
		dst[i] = max(dst[i], blk[i*stride+col])
	}
}

// widen copies every block of interleaved registers in regs (2^p rows of
// from bytes each) to blocks of rows of to bytes, the new columns zero.
func widen(regs [][]uint8, m, from, to int) {
	for k, old := range regs {
		if old == nil {
			continue
		}
		blk := make([]uint8, m*to)
		for i := range m {
			copy(blk[i*to:i*to+from], old[i*from:(i+1)*from])
		}
		regs[k] = blk
	}
}

// maxRegs sets dst[i] = max(dst[i], src[i]): the HyperLogLog union. It
// works on 8 registers at a time: every register is at most 64−p+1 < 128,
// so (a|0x80) − b never borrows across bytes and its top bit says a ≥ b.
func maxRegs(dst, src []uint8) {
	const hi = 0x8080808080808080
	src = src[:len(dst)]
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		a, b := binary.LittleEndian.Uint64(dst[i:]), binary.LittleEndian.Uint64(src[i:])
		ge := (((a | hi) - b) & hi) >> 7 * 0xff // 0xff in each byte where a ≥ b
		binary.LittleEndian.PutUint64(dst[i:], a&ge|b&^ge)
	}
	for ; i < len(dst); i++ {
		dst[i] = max(dst[i], src[i])
	}
}

// sketchHeader is the length of the header of the library's version 2 dense
// encoding: version, p, 0 (no register bias), 0 (dense), then the register
// count as a big-endian uint32.
const sketchHeader = 8

// newSketchBuf returns a buffer for the encoding of a 2^p-register dense
// sketch: the header filled in, the registers (buf[sketchHeader:]) zero.
func newSketchBuf(p uint8) []byte {
	m := 1 << p
	buf := make([]byte, sketchHeader+m)
	buf[0], buf[1] = 2, p
	binary.BigEndian.PutUint32(buf[4:8], uint32(m))
	return buf
}

// estimateRegs returns the library's cardinality estimate of the dense
// sketch encoded in buf (from newSketchBuf, registers filled). It returns 0
// when every register is 0 and, defensively, when the library rejects the
// encoding (which only a register above 64-p+1 could cause; insertRegs
// never writes one).
func estimateRegs(buf []byte) uint64 {
	empty := true
	for _, v := range buf[sketchHeader:] {
		if v != 0 {
			empty = false
			break
		}
	}
	if empty {
		return 0
	}
	var sk hyperloglog.Sketch
	if err := sk.UnmarshalBinary(buf); err != nil {
		return 0
	}
	return sk.Estimate()
}
