#!/usr/bin/env python3
"""trace_gz_test.py PIPETWIN SOURCE_DIR: `simulate --trace T.json.gz` writes the plain trace's
bytes gzip-compressed, atomically (no temporary file left, nothing written on failure)."""
import gzip
import os
import subprocess
import sys
import tempfile

pipetwin_bin, src = sys.argv[1], sys.argv[2]
job = os.path.join(src, "examples/schedules/1f1b.yaml")
tmp = tempfile.mkdtemp()
failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def simulate(*args):
    return subprocess.run([pipetwin_bin, "simulate", job, *args], capture_output=True, text=True)


plain, packed = os.path.join(tmp, "t.json"), os.path.join(tmp, "t.json.gz")
check(simulate("--trace", plain).returncode == 0, "--trace t.json exits 0")
check(simulate("--trace", packed).returncode == 0, "--trace t.json.gz exits 0")
with open(plain, "rb") as f:
    plain_bytes = f.read()
with open(packed, "rb") as f:
    packed_bytes = f.read()
check(packed_bytes[:2] == b"\x1f\x8b", "t.json.gz is a gzip stream")
check(gzip.decompress(packed_bytes) == plain_bytes, "decompressed, the plain trace byte for byte")
check(len(packed_bytes) < len(plain_bytes), f"smaller: {len(packed_bytes)} < {len(plain_bytes)} bytes")
check(sorted(os.listdir(tmp)) == ["t.json", "t.json.gz"], "no temporary file left")
again = os.path.join(tmp, "again.json.gz")
simulate("--trace", again)
with open(again, "rb") as f:
    check(f.read() == packed_bytes, "the same job gives the same compressed bytes")
r = simulate("--trace", os.path.join(tmp, "missing", "t.json.gz"))
# Output paths are checked before any work: a missing directory is bad input (exit 2).
check(r.returncode == 2 and "does not exist" in r.stderr,
      f"a path in a missing directory exits 2: {r.stderr.strip()}")
check(not os.path.exists(os.path.join(tmp, "missing")), "and writes nothing")
sys.exit(1 if failures else 0)
