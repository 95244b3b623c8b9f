// Package console is the operator console the daemon serves at /ui/ on its
// HTTP listener (--http-listen): a page that shows a pool's cutover live
// (weights, traffic share, hit ratio, pick rate, errors, instances, the
// ramp, migration readiness) and explains a pick, with the JSON endpoints
// it polls every second.
//
// Everything it shows and changes goes through a Backend, which
// *server.Server implements with the same AdminService and PickFor code
// paths the gRPC API uses, and every endpoint is authorized as the gRPC method it calls
// (internal/auth's table: operator-read to read, operator to write,
// gateway to explain, which is a real Pick). Credentials are a bearer token
// in the Authorization header, which the page asks for once and keeps in
// session storage, or a verified client certificate. Writes are POSTs that
// must carry the X-Prefixroute-Console header and a JSON body, which a
// cross-site form or a simple cross-origin request cannot send, so no
// cookie is ever needed or honoured (CSRF-safe).
//
// The static assets (index.html, style.css, and the scripts app.js,
// charts.js, overview.js, operate.js and main.js, run in that order) are
// embedded: no CDN, no fonts from the network, no build step. Limits: request bodies
// MaxBodyBytes, query values MaxQueryBytes, and one token bucket for the
// whole console (RequestsPerSecond, Burst); over them the answer is a 4xx
// JSON error {"error": "...", "code": "..."} saying what was wrong.
package console
