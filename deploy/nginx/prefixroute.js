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
    proxy(r, addrs);
}

function next(r) {
    const rest = r.variables.prefixroute_fallbacks;
    if (!rest) {
        answer(r, 502, 'no_instance_answered', 'no instance the router named accepted the connection');
        return;
    }
    proxy(r, rest.split(','));
}

export default {route, next};
