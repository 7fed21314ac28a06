"""Hashing throughput and memory of ``verifier.base.hash_file`` against ``sha256sum`` on the same file.

Writes a file of real (random, not sparse) bytes, reads it once so that both hashers start from the page
cache, then alternates ``sha256sum`` and our hasher ``--runs`` times each and prints both throughputs, their
ratio (goal: ours ≥ 90 % of sha256sum) and the peak memory our hasher adds above the interpreter (goal: flat,
under 64 MiB), measured in a subprocess as the growth of its peak RSS (``VmHWM``) and tracemalloc's peak
while hashing.

    .venv/bin/python bench/hash_throughput.py [--size-gib 2] [--runs 3] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_BLOCK = 64 * 1024 * 1024

# Runs in a fresh interpreter. Memory is read from /proc/self/status: VmHWM (peak RSS) belongs to the new
# address space that exec made, whereas ru_maxrss carries the parent's peak across fork+exec on Linux.
_OURS = """
import json, sys, time, tracemalloc
from pathlib import Path
from verifier.base._digests import hash_file

def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)

path = Path(sys.argv[1])
before = status("VmHWM")
tracemalloc.start()
started = time.perf_counter()
digest = hash_file(path)
elapsed = time.perf_counter() - started
_, traced_peak = tracemalloc.get_traced_memory()
print(json.dumps({"sha256": digest.sha256, "seconds": elapsed, "rss_before_kib": before,
                  "rss_peak_kib": status("VmHWM"), "traced_peak_bytes": traced_peak}))
"""


def write_file(path: Path, size: int) -> None:
    """``size`` bytes of random data: one random 64 MiB block, each copy stamped with its index."""
    block = bytearray(os.urandom(_BLOCK))
    with path.open("wb") as stream:
        written = 0
        index = 0
        while written < size:
            block[:8] = index.to_bytes(8, "little")
            chunk = memoryview(block)[: min(_BLOCK, size - written)]
            stream.write(chunk)
            written += len(chunk)
            index += 1
        stream.flush()
        os.fsync(stream.fileno())


def run_sha256sum(path: Path) -> tuple[str, float]:
    started = time.perf_counter()
    result = subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True)
    return result.stdout.split()[0], time.perf_counter() - started


def run_ours(path: Path) -> tuple[str, float, dict[str, int]]:
    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([repo, env.get("PYTHONPATH", "")])
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", _OURS, str(path)], capture_output=True, text=True, check=True, env=env
    )
    wall = time.perf_counter() - started
    data = json.loads(result.stdout)
    memory = {
        "rss_growth_kib": data["rss_peak_kib"] - data["rss_before_kib"],
        "rss_before_kib": data["rss_before_kib"],
        "traced_peak_bytes": data["traced_peak_bytes"],
        "process_wall_ms": round(wall * 1000),
    }
    return data["sha256"], data["seconds"], memory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gib", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the file (default: $TMPDIR)")
    args = parser.parse_args()
    if shutil.which("sha256sum") is None:
        print("sha256sum is not installed", file=sys.stderr)
        return 2
    size = int(args.size_gib * 1024**3)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="trtguard-hash-bench-") as folder:
        path = Path(folder) / "blob.bin"
        started = time.perf_counter()
        write_file(path, size)
        took = time.perf_counter() - started
        print(f"wrote {size / 1024**3:.2f} GiB of random bytes to {path} in {took:.1f} s")
        run_sha256sum(path)  # warm the page cache for both
        theirs: list[float] = []
        ours: list[float] = []
        memories: list[dict[str, int]] = []
        for _ in range(args.runs):
            reference, seconds = run_sha256sum(path)
            theirs.append(seconds)
            digest, seconds, memory = run_ours(path)
            ours.append(seconds)
            memories.append(memory)
            if digest != reference:
                print(f"MISMATCH: sha256sum {reference}, ours {digest}", file=sys.stderr)
                return 1
    mib = size / 1024**2
    their_rate = mib / statistics.median(theirs)
    our_rate = mib / statistics.median(ours)
    growth = max(m["rss_growth_kib"] for m in memories) / 1024
    traced = max(m["traced_peak_bytes"] for m in memories) / 1024**2
    print(
        f"sha256sum        : median {statistics.median(theirs):.3f} s = {their_rate:,.0f} MiB/s  (runs: "
        + ", ".join(f"{s:.3f}" for s in theirs)
        + ")"
    )
    print(
        f"verifier.base._digests : median {statistics.median(ours):.3f} s = {our_rate:,.0f} MiB/s  (runs: "
        + ", ".join(f"{s:.3f}" for s in ours)
        + ")"
    )
    print(f"ratio ours/sha256sum: {our_rate / their_rate:.2f}  (goal >= 0.90)")
    print(
        f"peak memory while hashing: RSS +{growth:.1f} MiB above the interpreter "
        f"({memories[0]['rss_before_kib'] / 1024:.1f} MiB after imports), tracemalloc peak {traced:.2f} MiB "
        "(goal: flat, < 64 MiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
