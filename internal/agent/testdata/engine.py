#!/usr/bin/python3
"""An engine stand-in for prefixagent's tests (Debian python3-zmq and
python3-msgpack; run with /usr/bin/python3).

It publishes KV event batches the way vLLM's and SGLang's ZmqEventPublisher
do (vllm/distributed/kv_events.py at vllm-project/vllm 0181ea3173e5 and its
earlier array_like form; python/sglang/srt/disaggregation/kv_events.py at
sgl-project/sglang 006d053f182f): a PUB socket that binds when the endpoint
holds "*" and connects otherwise, multipart (topic, seq as 8-byte
big-endian, msgpack payload), seq from 0; a ROUTER replay socket answering
(identity, "", start seq) with (identity, "", seq, payload) for every
buffered batch from start on, then (identity, "", -1, ""). It serves a
recorded /metrics page over HTTP.

Dialects (the payload as msgspec encodes each engine's structs):
  sglang      [ts, [["BlockStored", hashes, parent, tokens, block_size, lora_id], ...]]
  vllm-array  [ts, [["BlockStored", hashes, parent, tokens, block_size, lora_id, medium, lora_name], ...], dp_rank]
  vllm-map    {"ts", "events": [{"type": "BlockStored", ...named fields}], "data_parallel_rank"}
              with block hashes as 32-byte sha256 digests, as vLLM's default.

Commands, one JSON object per stdin line; each answers one stdout line:
  {"op": "store", "hashes": [..], "parent": h|null, "tokens": [..]}  -> "sent SEQ"
  {"op": "remove", "hashes": [..]}                                   -> "sent SEQ"
  {"op": "clear"}                                                    -> "sent SEQ"
  {"op": "drop", ...store/remove/clear}: buffer for replay, do not publish (a lost message)
  {"op": "metrics", "file": PATH}: serve another page                -> "ok"
The first stdout line is "ready METRICS_PORT PUB_PORT REPLAY_PORT".
"""

import argparse
import hashlib
import http.server
import json
import sys
import threading
import time

import msgpack
import zmq

parser = argparse.ArgumentParser()
parser.add_argument("--dialect", choices=["sglang", "vllm-array", "vllm-map"], required=True)
parser.add_argument("--pub", required=True, help="e.g. tcp://127.0.0.1:0 binds a free port when it has '*' or ends in :0")
parser.add_argument("--replay", default="")
parser.add_argument("--metrics", required=True, help="the /metrics page to serve")
parser.add_argument("--block-size", type=int, default=16)
parser.add_argument("--rank", type=int, default=0)
args = parser.parse_args()

page = {"body": open(args.metrics, "rb").read()}


class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        body = page["body"]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
threading.Thread(target=httpd.serve_forever, daemon=True).start()

ctx = zmq.Context.instance()
pub = ctx.socket(zmq.PUB)
pub.set_hwm(100_000)
pub_port = 0
if "*" in args.pub or args.pub.endswith(":0"):
    ep = args.pub.replace(":0", ":*") if args.pub.endswith(":0") else args.pub
    if ep.endswith(":*"):
        pub_port = pub.bind_to_random_port(ep[: -len(":*")])
    else:
        pub.bind(ep)
        pub_port = int(ep.rsplit(":", 1)[1])
else:
    pub.connect(args.pub)  # the agent binds

replay = None
replay_port = 0
if args.replay:
    replay = ctx.socket(zmq.ROUTER)
    replay_port = replay.bind_to_random_port(args.replay.rsplit(":", 1)[0])

buffer = []  # (seq, payload), as the publisher's deque
lock = threading.Lock()
END_SEQ = (-1).to_bytes(8, "big", signed=True)


def engine_hash(h):
    if args.dialect == "vllm-map":
        return hashlib.sha256(str(h).encode()).digest()
    return h


def event(cmd):
    op = cmd["op"]
    hashes = [engine_hash(h) for h in cmd.get("hashes", [])]
    parent = cmd.get("parent")
    parent = None if parent is None else engine_hash(parent)
    if args.dialect == "vllm-map":
        if op == "store":
            return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
                    "token_ids": cmd["tokens"], "block_size": args.block_size, "lora_id": None,
                    "medium": "GPU", "lora_name": None}
        if op == "remove":
            return {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
        return {"type": "AllBlocksCleared"}
    if op == "store":
        ev = ["BlockStored", hashes, parent, cmd["tokens"], args.block_size, None]
        if args.dialect == "vllm-array":
            ev += ["GPU", None]
        return ev
    if op == "remove":
        return ["BlockRemoved", hashes] + (["GPU"] if args.dialect == "vllm-array" else [])
    return ["AllBlocksCleared"]


def batch(ev):
    if args.dialect == "vllm-map":
        return {"ts": time.time(), "events": [ev], "data_parallel_rank": args.rank}
    if args.dialect == "vllm-array":
        return [time.time(), [ev], args.rank]
    return [time.time(), [ev]]


seq_gen = iter(range(1 << 62))


def serve_replay():
    while True:
        client_id, _, start = replay.recv_multipart()
        start_seq = int.from_bytes(start, "big")
        with lock:
            items = [(s, p) for s, p in buffer if s >= start_seq]
        for s, p in items:
            replay.send_multipart((client_id, b"", s.to_bytes(8, "big"), p))
        replay.send_multipart((client_id, b"", END_SEQ, b""))


if replay is not None:
    threading.Thread(target=serve_replay, daemon=True).start()

print(f"ready {httpd.server_address[1]} {pub_port} {replay_port}", flush=True)

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "metrics":
        page["body"] = open(cmd["file"], "rb").read()
        print("ok", flush=True)
        continue
    drop = cmd["op"] == "drop"
    if drop:
        cmd = cmd["event"]
    payload = msgpack.packb(batch(event(cmd)), use_bin_type=True)
    with lock:
        seq = next(seq_gen)
        buffer.append((seq, payload))
    if not drop:
        pub.send_multipart((b"", seq.to_bytes(8, "big"), payload))
    print(f"sent {seq}", flush=True)
