// prefixroute.js: nginx (njs) routes each OpenAI request through the
// prefixrouted sidecar. Loaded by nginx.conf in this directory; docs/nginx.md
// explains both.
//
// route:  the body goes, unchanged, to the sidecar's POST /v1/route (a
//         subrequest to the internal location /_prefixroute/route; nginx
//         hands it the client's body as it is). On 204 the request is
//         proxied to the first address of x-gateway-destination-endpoint;
//         any other answer of the sidecar is returned to the client as it
//         is (status, JSON body, x-prefixroute-reason).
// next:   the proxied request could not connect (error_page 502 504):
//         report the failed try to the sidecar (reportFailedTry), then
//         proxy it to the next address of the list, or answer 502.
//
// Nothing here reads, parses or hashes the prompt: the sidecar does.

const REASON = 'x-prefixroute-reason';

// answer ends r with an OpenAI-style JSON error of nginx's own.
function answer(r, status, code, message) {
    r.headersOut['Content-Type'] = 'application/json';
    r.headersOut[REASON] = code;
    r.return(status, JSON.stringify({error: {message: message, type: 'server_error', code: code}}));
}

// proxy sends r to the first of addrs and keeps the rest for next.
function proxy(r, addrs) {
    r.variables.prefixroute_upstream = addrs[0];
    r.variables.prefixroute_fallbacks = addrs.slice(1).join(',');
    r.internalRedirect('@prefixroute_upstream');
}

async function route(r) {
    let reply;
    try {
        reply = await r.subrequest('/_prefixroute/route', {method: 'POST'});
    } catch (e) {
        answer(r, 503, 'router_unavailable', 'the routing sidecar could not be asked: ' + e.message);
        return;
    }
    if (reply.status !== 204) {
        const reason = reply.headersOut[REASON];
        if (!reason) {
            // Not the sidecar's answer: nginx's own error for an
            // unreachable or timed-out sidecar.
            answer(r, 503, 'router_unavailable', 'the routing sidecar did not answer (HTTP ' + reply.status + ')');
            return;
        }
        r.headersOut['Content-Type'] = 'application/json';
        r.headersOut[REASON] = reason;
        r.return(reply.status, reply.responseText);
        return;
    }
    const addrs = (reply.headersOut['x-gateway-destination-endpoint'] || '').split(',').filter(a => a !== '');
    if (addrs.length === 0) {
        answer(r, 503, 'router_unavailable', 'the routing sidecar named no address');
        return;
    }
    r.variables.prefixroute_instance = reply.headersOut['x-prefixroute-instance'] || '';
    rememberPick(r, reply);
    proxy(r, addrs);
}

async function next(r) {
    await reportFailedTry(r);
    const rest = r.variables.prefixroute_fallbacks;
    if (!rest) {
        answer(r, 502, 'no_instance_answered', 'no instance the router named accepted the connection');
        return;
    }
    proxy(r, rest.split(','));
}

// Outcomes: the sidecar learns of each failed try (POST /v1/outcome,
// PickService.ReportOutcome), so that an instance whose server is gone
// while its reporter still says ok costs one failed connect, not one per
// request: a connect_failed keeps it out of picks for a 5 s back-off.

// rememberPick keeps what reportFailedTry needs of the sidecar's /v1/route
// answer: the pool, and each listed address with its instance id.
function rememberPick(r, reply) {
    const addrs = (reply.headersOut['x-gateway-destination-endpoint'] || '').split(',');
    const ids = (reply.headersOut['x-prefixroute-instances'] || '').split(',');
    r.variables.prefixroute_pool = reply.headersOut['x-prefixroute-pool'] || '';
    r.variables.prefixroute_ids = addrs.map((a, i) => a + '=' + (ids[i] || '')).join(',');
}

// tryStatus is the outcome of the try that just failed, from nginx's
// upstream variables (their last entry is that try's): no connect time
// means the connection failed; 504 a timeout; else the instance broke the
// answer off (502).
function tryStatus(r) {
    const last = v => (v || '').split(/[,:] */).pop().trim();
    if (last(r.variables.upstream_connect_time) === '-') {
        return 'OUTCOME_STATUS_CONNECT_FAILED';
    }
    return last(r.variables.upstream_status) === '504' ? 'OUTCOME_STATUS_TIMEOUT' : 'OUTCOME_STATUS_UPSTREAM_ERROR';
}

// reportFailedTry tells the sidecar that the try on $prefixroute_upstream
// failed, before the request goes to the next address. It waits for the
// sidecar (on loopback, well under a millisecond; bounded by the timeouts
// of /_prefixroute/outcome) so that the next pick already sees it; a
// failure to report is logged and the request goes on regardless.
async function reportFailedTry(r) {
    const addr = r.variables.prefixroute_upstream;
    const pair = (r.variables.prefixroute_ids || '').split(',').find(p => p.startsWith(addr + '='));
    const instance = pair ? pair.slice(addr.length + 1) : '';
    const pool = r.variables.prefixroute_pool;
    if (!pool || !instance) {
        return;
    }
    const body = JSON.stringify({outcomes: [{pool: pool, request_id: r.variables.prefixroute_request_id,
        instance_id: instance, status: tryStatus(r)}]});
    try {
        const reply = await r.subrequest('/_prefixroute/outcome', {method: 'POST', body: body});
        if (reply.status !== 200) {
            r.warn('prefixroute: the sidecar refused the outcome of ' + instance + ': HTTP ' + reply.status + ' ' + reply.responseText);
        }
    } catch (e) {
        r.warn('prefixroute: the outcome of ' + instance + ' was not reported: ' + e.message);
    }
}

export default {route, next};
