package server

import (
	"github.com/prefixroute/prefixroute/frontend"
)

// Server is the router every front end sees: it implements frontend.Picker
// with PickFor (pickrecord.go), RecordServed and the methods below. Front
// ends import frontend, never server; the daemon hands them the Server.
var _ frontend.Picker = (*Server)(nil)

// BlockSize is the pool's block_size_tokens (its policy's, or 0 when the
// router knows no such pool: the caller's default applies). Safe for
// concurrent use.
func (s *Server) BlockSize(pool string) int {
	p, err := s.reg.Pool(pool)
	if err != nil {
		return 0
	}
	return int(p.Config().Policy.BlockSizeTokens)
}

// Endpoints appends the pool's instances, in snapshot order, to dst. The
// error is a gRPC status (NotFound for an unknown pool, Unavailable with
// reason POOL_WARMING for a pool known from before a restart). Safe for
// concurrent use.
func (s *Server) Endpoints(pool string, dst []frontend.Endpoint) ([]frontend.Endpoint, error) {
	p, err := s.reg.Pool(pool)
	if err != nil {
		return dst, statusOf(s.missingPool(pool, err))
	}
	for _, in := range p.Instances(s.opts.Now()) {
		dst = append(dst, frontend.Endpoint{Instance: in.Instance, Address: in.Address})
	}
	return dst, nil
}

// MaxExcludes is the most exclude_instances (plus load-snapshot entries)
// one Pick may carry: the registry's limit, state.DefaultMaxExcludes
// unless configured.
func (s *Server) MaxExcludes() int { return s.reg.Limits().MaxExcludes }
