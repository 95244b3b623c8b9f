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
// (2^p rows of stride bytes; register i of the column at byte
// i*stride+col) with hs[k.from:] (each from in [0, len(hs)], each col <
// stride; sinks is reordered). The sinks taking a block are updated
// together, eight columns a word at a time: the union being a max, every
// column ends as insertRegs leaves its registers alone. Registers and
// values are at most 64−p+1 < 128, so (a|0x80)−b never borrows across
// bytes (as in maxRegs).
func insertPairs(blk []uint8, stride int, p uint8, hs []uint64, sinks []sketchSink) {
	// By from, descending (insertion sort: fewer than MaxDeployments
	// sinks), so that hs[sinks[q].from:sinks[q-1].from] goes to sinks[q:].
	for i := 1; i < len(sinks); i++ {
		for j := i; j > 0 && sinks[j].from > sinks[j-1].from; j-- {
			sinks[j], sinks[j-1] = sinks[j-1], sinks[j]
		}
	}
	const lsb, hi = 0x0101010101010101, 0x8080808080808080
	shift := 64 - p
	guard := uint64(1) << (p - 1)
	var mask [MaxMaxDeployments / 8]uint64 // the columns taking the segment
	words := stride / 8
	rows := len(blk) / stride
	for q := len(sinks) - 1; q >= 0; q-- {
		c := sinks[q].col
		mask[c/8] |= 0xff << (8 * (c % 8))
		lo, end := sinks[q].from, len(hs)
		if q > 0 {
			end = sinks[q-1].from
		}
		for _, x := range hs[lo:max(lo, end)] {
			i := int(x >> shift)
			if i >= rows {
				continue // never: rows is 2^p
			}
			row := blk[i*stride : (i+1)*stride]
			r := uint64(uint8(bits.LeadingZeros64(x<<p|guard))+1) * lsb
			for w, m := range mask[:words] {
				if m == 0 {
					continue
				}
				v := binary.LittleEndian.Uint64(row[8*w:])
				ge := (((v | hi) - r) & hi) >> 7 * 0xff // 0xff in each byte where v ≥ r
				binary.LittleEndian.PutUint64(row[8*w:], v&(ge|^m)|r&^ge&m)
			}
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
