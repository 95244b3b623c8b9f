package extproc

import "github.com/prefixroute/prefixroute/internal/gateway"

// appendBody adds a request body chunk to the stream's buffer, charging
// the buffer's growth to the daemon-wide budget (gateway.Config.BodyBudget)
// before allocating it: what is charged is the buffer's capacity, the
// memory held. It returns the answer to send when the budget is spent; the
// buffer is then unchanged. The caller has checked the per-request limit
// limit (len(s.body)+len(chunk) <= limit).
func (s *stream) appendBody(chunk []byte, limit int) *gateway.Error {
	need := len(s.body) + len(chunk)
	if need > cap(s.body) {
		grown := min(max(need, 2*cap(s.body)), limit)
		if e := s.p.mapper.Config().BodyBudget.Take(grown - s.charged); e != nil {
			return e
		}
		s.charged = grown
		buf := make([]byte, len(s.body), grown)
		copy(buf, s.body)
		s.body = buf
	}
	s.body = append(s.body, chunk...)
	return nil
}

// releaseBody drops the buffered body and gives its bytes back to the
// budget. The stream calls it once the body is no longer needed (decided)
// and when it ends, however it ends.
func (s *stream) releaseBody() {
	s.p.mapper.Config().BodyBudget.Give(s.charged)
	s.charged = 0
	s.body = nil
}
