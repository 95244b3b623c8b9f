#!/usr/bin/env python3
"""Reference implementation of the prefixhash specification (../README.md).

Not used by the Go code or its tests: it exists to show that the
specification is complete, and to check vectors.json independently of the Go
implementation. Usage:

    python3 reference.py [vectors.json]

It checks every case of the vector file and exits non-zero on a mismatch.
XXH3-64 comes from the `xxhash` package (pip install xxhash) when it is
installed, else from the system libxxhash (>= 0.8.0) through ctypes.
"""
import ctypes
import ctypes.util
import json
import os
import struct
import sys

MAX_BLOCKS = 8192
SEED_TAG = b"prefixroute/prefixhash/v1/seed"
TEXT_TAG = b"prefixroute/prefixhash/v1/text"

try:
    import xxhash

    def H(seed, data):
        """XXH3-64 of data with a 64-bit seed."""
        return xxhash.xxh3_64_intdigest(data, seed=seed)

except ImportError:
    _lib = ctypes.CDLL(ctypes.util.find_library("xxhash") or "libxxhash.so.0")
    _lib.XXH3_64bits_withSeed.restype = ctypes.c_uint64
    _lib.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]

    def H(seed, data):
        """XXH3-64 of data with a 64-bit seed."""
        return _lib.XXH3_64bits_withSeed(data, len(data), seed)


def seed(pool, salt=""):
    p, s = pool.encode("utf-8"), salt.encode("utf-8")
    msg = SEED_TAG + struct.pack("<Q", len(p)) + p + struct.pack("<Q", len(s)) + s
    return H(0, msg)


def num_blocks(n, size):
    return min(n // size, MAX_BLOCKS) if size > 0 and n > 0 else 0


def tokens(seed_, block_size, ids):
    out, h = [], seed_
    for k in range(num_blocks(len(ids), block_size)):
        block = ids[k * block_size:(k + 1) * block_size]
        h = H(h, struct.pack("<%dI" % block_size, *block))
        out.append(h)
    return out


def text(seed_, chunk_bytes, prompt):
    data = prompt.encode("utf-8")
    out, h = [], H(seed_, TEXT_TAG)
    for k in range(num_blocks(len(data), chunk_bytes)):
        h = H(h, data[k * chunk_bytes:(k + 1) * chunk_bytes])
        out.append(h)
    return out


def check(name, got, case):
    if "hashes" in case:
        want = [int(x, 16) for x in case["hashes"]]
        ok = got == want
    else:
        ok = len(got) == case["hash_count"] and got[-1] == int(case["last_hash"], 16)
    if not ok:
        print("MISMATCH", name, ["0x%016x" % h for h in got[:4]], "...")
    return ok


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "vectors.json")
    with open(path, encoding="utf-8") as f:
        v = json.load(f)
    results = []
    for c in v["seeds"]:
        s = seed(c["pool"], c["salt"])
        results.append(check("seed %r %r" % (c["pool"], c["salt"]), [s, H(s, TEXT_TAG)],
                             {"hashes": [c["seed"], c["text_seed"]]}))
    for c in v["tokens"]:
        ids = c["tokens"] if "tokens" in c else list(range(c["tokens_iota"]))
        results.append(check("tokens " + c["name"], tokens(seed(c["pool"], c["salt"]), c["block_size"], ids), c))
    for c in v["text"]:
        results.append(check("text " + c["name"], text(seed(c["pool"], c["salt"]), c["chunk_bytes"], c["text"]), c))
    failed = results.count(False)
    print("vectors: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
