// prefixroute.js: nginx (njs) routes each OpenAI request through the
// prefixrouted sidecar. Loaded by nginx.conf in this directory; docs/nginx.md
// explains both.
//
// route:  the body goes, unchanged, to the sidecar's POST /v1/route (a
//         subrequest to the internal location /_prefixroute/route; nginx
//         hands it the client's body as it is). On 204 the request is
//         proxied to the first address of x-gateway-destination-endpoint,
//         with x-prefiller-host-port and x-prefixroute-prefill-instance
//         when the sidecar names a prefill instance (nginx.conf drops the
//         client's own);
//         any other answer of the sidecar is returned to the client as it
//         is (status, JSON body, x-prefixroute-reason, Retry-After), unless
//         it fails open (below).
// next:   the proxied request could not connect (error_page 502 504):
//         report the failed try to the sidecar (reportFailedTry; only a
//         try of the sidecar's own pick: a request that failed open names
//         no pool), then proxy it to the next address of the list, or
//         answer 502.
//
// Fail-open (the functions after next): when the sidecar cannot route a
// request (unreachable, timed out, a 5xx of its own other than drained)
// and $prefixroute_fail_open is on, the request goes to the model's
// static list ($prefixroute_static_upstreams) ranked by rendezvous hashing
// of the prompt's first 64 bytes, and is marked x-prefixroute-fallback:
// static. Only then does the script read the prompt; otherwise the sidecar
// alone parses and hashes it.

import crypto from 'crypto';

const REASON = 'x-prefixroute-reason';
const RETRY_AFTER = 'Retry-After';

// answer ends r with an OpenAI-style JSON error of nginx's own.
function answer(r, status, code, message) {
    r.headersOut['Content-Type'] = 'application/json';
    r.headersOut[REASON] = code;
    r.return(status, JSON.stringify({error: {message: message, type: 'server_error', code: code}}));
}

// passOn answers r with the sidecar's own answer: its status, JSON body,
// reason and, for a pool warming up, its Retry-After (1 s).
function passOn(r, reply, reason) {
    r.headersOut['Content-Type'] = 'application/json';
    r.headersOut[REASON] = reason;
    const retry = reply.headersOut[RETRY_AFTER];
    if (retry) {
        r.headersOut[RETRY_AFTER] = retry;
    }
    r.return(reply.status, reply.responseText);
}

// proxy sends r to the first of addrs and keeps the rest for next. The
// redirect to @prefixroute_upstream happens when the js_content handler
// ends (njs), so the caller must not answer r itself afterwards.
function proxy(r, addrs) {
    r.variables.prefixroute_upstream = addrs[0];
    r.variables.prefixroute_try_instance = instanceOf(r, addrs[0]);
    r.variables.prefixroute_fallbacks = addrs.slice(1).join(',');
    r.internalRedirect('@prefixroute_upstream');
}

async function route(r) {
    let reply;
    try {
        reply = await r.subrequest('/_prefixroute/route', {method: 'POST'});
    } catch (e) {
        unavailable(r, 'the routing sidecar could not be asked: ' + e.message);
        return;
    }
    if (reply.status !== 204) {
        const reason = reply.headersOut[REASON];
        if (!reason) {
            // Not the sidecar's answer: nginx's own error for an
            // unreachable or timed-out sidecar.
            unavailable(r, 'the routing sidecar did not answer (HTTP ' + reply.status + ')');
            return;
        }
        // A failure of the sidecar's own (a 5xx other than drained:
        // pool_warming after a restart, no_eligible_instance, timeout,
        // internal) fails open like its absence. staticFallback returns
        // null once it has proxied r: r then must get no answer of its
        // own, as r.return would send one before the redirect, which
        // happens only when this handler ends (nginx then logs "header
        // already sent" for the upstream's answer).
        if (sidecarFailed(reply.status, reason) &&
            staticFallback(r, 'the routing sidecar answered HTTP ' + reply.status + ' ' + reason) === null) {
            return;
        }
        passOn(r, reply, reason);
        return;
    }
    const addrs = (reply.headersOut['x-gateway-destination-endpoint'] || '').split(',').filter(a => a !== '');
    if (addrs.length === 0) {
        unavailable(r, 'the routing sidecar named no address');
        return;
    }
    r.variables.prefixroute_instance = reply.headersOut['x-prefixroute-instance'] || '';
    r.variables.prefixroute_prefiller = reply.headersOut['x-prefiller-host-port'] || '';
    r.variables.prefixroute_prefill_instance = reply.headersOut['x-prefixroute-prefill-instance'] || '';
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

// instanceOf is the instance id of address addr in the latest answer
// ($prefixroute_ids: "addr=id,..."), '' when it names none.
function instanceOf(r, addr) {
    const pair = (r.variables.prefixroute_ids || '').split(',').find(p => p.startsWith(addr + '='));
    return pair ? pair.slice(addr.length + 1) : '';
}

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
// failure to report is logged and the request goes on regardless. On a
// disaggregated pick it names the decode instance only: nginx never
// connects to the prefill instance (the decode pod's routing sidecar
// does), so a failed try says nothing about it (docs/nginx.md).
async function reportFailedTry(r) {
    const instance = r.variables.prefixroute_try_instance;
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


// Fail-open ---------------------------------------------------------------
//
// The static choice ranks the model's list by rendezvous (highest random
// weight) hashing, as pkg/client's fallback does: every endpoint scores
// SHA-1(key, "\n", its id, or its address when it has none), first 48 bits,
// highest first, ties to the smaller id; the request goes to the first and,
// when a connection fails, to the next (prefixroute.next). The key is the
// model and the prompt's first 64 bytes of canonical text, or its first 16
// token ids (pkg/prefixhash/README.md "Text of an OpenAI request"): requests
// sharing them (the same system prompt) go to the same endpoint from every
// nginx with the same list, and removing an endpoint moves only its
// requests. A shorter prompt, or a body over client_body_buffer_size (nginx
// keeps it in a file the script cannot read), gets a random endpoint.
// docs/nginx.md says why the hash is not pkg/client's XXH3.

const FALLBACK = 'static'; // $prefixroute_fallback, x-prefixroute-fallback
const KEY_BYTES = 64;      // bytes of canonical text in the key: one text-mode chunk
const KEY_TOKENS = 16;     // token ids in the key: one block

// unavailable answers a request the sidecar could not route: the static
// choice when fail-open is on and the model has a list, else 503
// router_unavailable.
function unavailable(r, cause) {
    const note = staticFallback(r, cause);
    if (note !== null) {
        answer(r, 503, 'router_unavailable', cause + note);
    }
}

// sidecarFailed reports whether an answer of the sidecar is its failure
// rather than its decision: a 5xx other than drained (the operator set
// every weight to 0, which fail-open must not override).
function sidecarFailed(status, reason) {
    return status >= 500 && reason !== 'drained';
}

// staticFallback proxies r to the static choice and returns null, or,
// when it cannot (fail-open off, no list for the model), returns a note
// for the caller's error message ('' when fail-open is off).
function staticFallback(r, cause) {
    if (r.variables.prefixroute_fail_open !== 'on') {
        return '';
    }
    const body = promptBody(r);
    const model = body !== null && typeof body.model === 'string' ? body.model : '';
    r.variables.prefixroute_model = model; // the map of $prefixroute_static_upstreams reads it
    const eps = staticList(r.variables.prefixroute_static_upstreams || '');
    if (eps.length === 0) {
        return '; fail-open has no static list for model "' + model + '" ($prefixroute_static_upstreams)';
    }
    const key = body !== null ? promptKey(body) : '';
    const ranked = rank(eps, key === '' ? '' : model + '\n' + key);
    r.variables.prefixroute_fallback = FALLBACK;
    r.variables.prefixroute_instance = ranked[0].id;
    r.variables.prefixroute_ids = ranked.map(e => e.addr + '=' + e.id).join(',');
    r.warn('prefixroute: ' + cause + '; fail-open: static choice ' + ranked[0].addr +
        (key === '' ? ' (no prompt prefix to hash: random)' : ''));
    proxy(r, ranked.map(e => e.addr));
    return null;
}

// staticList parses a static list: entries "[id=]host:port" separated by
// spaces or commas.
function staticList(s) {
    return s.split(/[\s,]+/).filter(e => e !== '').map(e => {
        const i = e.indexOf('=');
        return i < 0 ? {id: '', addr: e} : {id: e.slice(0, i), addr: e.slice(i + 1)};
    });
}

// rank orders eps by rendezvous score for key, highest first; an empty key
// is replaced by a random one.
function rank(eps, key) {
    if (key === '') {
        key = 'random\n' + Math.random();
    }
    const scored = eps.map(e => {
        const k = e.id !== '' ? e.id : e.addr;
        const h = crypto.createHash('sha1').update(key).update('\n').update(k).digest('hex');
        return {e: e, k: k, score: parseInt(h.slice(0, 12), 16)};
    });
    scored.sort((a, b) => b.score - a.score || (a.k < b.k ? -1 : a.k > b.k ? 1 : 0));
    return scored.map(x => x.e);
}

// promptBody is the request's parsed JSON body, or null when it is not
// JSON or nginx holds it in a file (over client_body_buffer_size).
function promptBody(r) {
    try {
        const b = JSON.parse(r.requestText);
        return b !== null && typeof b === 'object' && !Array.isArray(b) ? b : null;
    } catch (e) {
        return null;
    }
}

// promptKey is the prompt's first KEY_TOKENS token ids, or its first
// KEY_BYTES bytes of canonical text, hex; '' when the prompt is shorter.
function promptKey(body) {
    const ids = tokenIds(body.prompt !== undefined ? body.prompt : body.input);
    if (ids !== null) {
        return ids.length >= KEY_TOKENS ? 'tokens ' + ids.slice(0, KEY_TOKENS).join(',') : '';
    }
    const b = Buffer.from(promptText(body));
    return b.length >= KEY_BYTES ? 'text ' + b.slice(0, KEY_BYTES).toString('hex') : '';
}

// tokenIds is a prompt given as token ids (a list of integers, or the
// first list of a batch), else null.
function tokenIds(p) {
    if (Array.isArray(p) && Array.isArray(p[0])) {
        p = p[0];
    }
    if (!Array.isArray(p) || p.length === 0 || !p.slice(0, KEY_TOKENS).every(Number.isInteger)) {
        return null;
    }
    return p;
}

// promptText is the start of the prompt's canonical text, at least
// KEY_BYTES characters when the prompt has them.
function promptText(body) {
    const p = body.prompt !== undefined ? body.prompt : body.input;
    let msgs = body.messages;
    if (!Array.isArray(msgs) && Array.isArray(p) && p.length > 0 && typeof p[0] === 'object') {
        msgs = p; // /v1/responses input as a list of messages
    }
    if (!Array.isArray(msgs)) {
        if (typeof p === 'string') {
            return p;
        }
        return Array.isArray(p) ? p.filter(s => typeof s === 'string').join('\n') : '';
    }
    let s = body.tools !== undefined && body.tools !== null ? 'tools\n' + JSON.stringify(body.tools) + '\n' : '';
    for (let i = 0; i < msgs.length && s.length < KEY_BYTES; i++) {
        const m = msgs[i] !== null && typeof msgs[i] === 'object' ? msgs[i] : {};
        s += (typeof m.role === 'string' ? m.role : '') + '\n' + contentText(m.content) + '\n';
    }
    return s;
}

// contentText is a message content's text: a string itself, a list of
// parts each part's text or its JSON, anything else empty.
function contentText(c) {
    if (typeof c === 'string') {
        return c;
    }
    if (!Array.isArray(c)) {
        return '';
    }
    return c.map(part => part !== null && typeof part === 'object' && typeof part.text === 'string' ?
        part.text : JSON.stringify(part)).join('');
}

export default {route, next};
