// Package nginx holds no code: it is the home of the nginx configuration
// (nginx.conf) and njs script (prefixroute.js) that route a gateway's
// OpenAI requests through prefixrouted's HTTP POST /v1/route, and of the
// end-to-end test that runs them: a real nginx (Debian's nginx and
// libnginx-mod-http-js, which 'make test-deps' installs), a real
// prefixrouted and HTTP model-server stand-ins that report their load and
// cache through pkg/client (in a disaggregated pool, with their prefill or
// decode role; and internal/pdtest's engines behind a stand-in of llm-d's
// decode-side sidecar). docs/nginx.md explains the setup.
package nginx
