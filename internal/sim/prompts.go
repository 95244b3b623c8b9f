package sim

import (
	"math/rand/v2"

	"github.com/prefixroute/prefixroute/pkg/prefixhash"
)

// poolSeed is the chain seed of a pool's token-mode hashes, as gateways
// compute it (prefixhash.Seed with no salt).
func poolSeed(pool string) uint64 { return prefixhash.Seed(pool, "") }

// chain is a growing token sequence as block hashes: the full blocks
// hashed with prefixhash (each seeded with the previous block's hash, so a
// hash names its whole prefix), the trailing partial block kept as tokens.
type chain struct {
	hashes []uint64
	tail   []uint32
	tokens int
}

// fork returns a chain that starts as c and may grow on its own: the hashes
// are shared with a capped capacity, so growing either never writes into
// the other's.
func (c *chain) fork() chain {
	return chain{hashes: c.hashes[:len(c.hashes):len(c.hashes)], tail: append([]uint32(nil), c.tail...), tokens: c.tokens}
}

// extend appends n tokens generated from key, hashing every block they
// complete with seed as the chain's origin.
func (c *chain) extend(seed uint64, bs, n int, key uint64) {
	buf := append(c.tail, make([]uint32, n)...)
	fillTokens(buf[len(c.tail):], key)
	full := len(buf) / bs * bs
	last := seed
	if len(c.hashes) > 0 {
		last = c.hashes[len(c.hashes)-1]
	}
	c.hashes = prefixhash.Tokens(c.hashes, last, bs, buf[:full])
	c.tail = append(c.tail[:0:0], buf[full:]...)
	c.tokens += n
}

// fillTokens writes token ids derived from key: distinct keys give distinct
// sequences (with overwhelming probability), so distinct prompts only share
// the blocks they are meant to share.
func fillTokens(buf []uint32, key uint64) {
	for j := range buf {
		buf[j] = uint32(splitmix(key+uint64(j)) % 128000)
	}
}

// splitmix is SplitMix64's finaliser: a cheap, well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// key mixes its parts into one token-generation key.
func key(parts ...uint64) uint64 {
	h := uint64(0x6b6579)
	for _, p := range parts {
		h = splitmix(h ^ p)
	}
	return h << 20 // room for 2^20 token positions per key
}

// classGen generates the requests of one class.
type classGen struct {
	spec   *ClassSpec
	idx    int
	seed   uint64
	zipf   *zipf
	groups []*chain
	convs  []*conversation
	convN  uint64
}

// conversation is one multi-turn conversation.
type conversation struct {
	id        uint64
	chain     chain
	turnsLeft int
	turn      int
}

func newClassGen(c *ClassSpec, idx int, seed uint64) *classGen {
	g := &classGen{spec: c, idx: idx, seed: seed, groups: make([]*chain, c.Groups)}
	if c.Groups > 1 {
		g.zipf = newZipf(c.Groups, c.Zipf)
	}
	if c.Kind == "conversation" {
		g.convs = make([]*conversation, c.Conversations)
	}
	return g
}

// group returns prefix group k, hashing it the first time. Its length is
// drawn from its own RNG, so it does not depend on the order of requests.
func (g *classGen) group(w *synthetic, k int) *chain {
	if c := g.groups[k]; c != nil {
		return c
	}
	rng := rand.New(rand.NewPCG(g.seed^uint64(g.idx)<<32, uint64(k)))
	c := &chain{}
	c.extend(w.poolSeed, w.bs, g.spec.PrefixTokens.Sample(rng), key(g.seed, 1, uint64(g.idx), uint64(k)))
	g.groups[k] = c
	return c
}

func (g *classGen) drawGroup(w *synthetic) *chain {
	k := 0
	if g.zipf != nil {
		k = g.zipf.sample(w.rng)
	}
	return g.group(w, k)
}

// fill sets r's prompt (and answer) for the class.
func (g *classGen) fill(w *synthetic, r *Request) {
	out := g.spec.OutputTokens.Sample(w.rng)
	r.OutputTokens = uint32(out)
	if g.spec.Kind != "conversation" {
		c := g.drawGroup(w).fork()
		c.extend(w.poolSeed, w.bs, g.spec.SuffixTokens.Sample(w.rng), key(g.seed, 2, r.ID))
		r.PromptTokens, r.Hashes = uint32(c.tokens), c.hashes
		return
	}
	slot := w.rng.IntN(len(g.convs))
	user := g.spec.UserTokens.Sample(w.rng)
	cv := g.convs[slot]
	if cv == nil || cv.turnsLeft <= 0 || cv.chain.tokens+user+out > g.spec.MaxPromptTokens {
		cv = &conversation{id: g.convN, chain: g.drawGroup(w).fork(), turnsLeft: max(1, g.spec.Turns.Sample(w.rng))}
		g.convN++
		g.convs[slot] = cv
		user = g.spec.SuffixTokens.Sample(w.rng)
	}
	cv.chain.extend(w.poolSeed, w.bs, user, key(g.seed, 3, uint64(g.idx), cv.id, uint64(cv.turn), 0))
	n := len(cv.chain.hashes)
	r.PromptTokens, r.Hashes = uint32(cv.chain.tokens), cv.chain.hashes[:n:n]
	cv.chain.extend(w.poolSeed, w.bs, out, key(g.seed, 3, uint64(g.idx), cv.id, uint64(cv.turn), 1))
	m := len(cv.chain.hashes)
	r.DecodeHashes = cv.chain.hashes[n:m:m]
	cv.turn++
	cv.turnsLeft--
}
