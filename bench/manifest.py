"""Build-manifest costs: hashing a build's files (``manifest create``), validating and diffing manifests.

Run from the repository root::

    .venv/bin/python bench/manifest.py                       # 4 x 256 MiB files, 2,000-file dataset
    .venv/bin/python bench/manifest.py --file-mib 64 --repeat 3
    python3 bench/manifest.py --only hashing --threads 1,2,4,8,16   # needs nothing beyond the stdlib

Hashing: the files are written once into a temporary folder (then sit in the page cache, so this measures
hashing, not the disk). The baseline is a plain sequential ``hashlib.sha256`` loop over the same files in
the same run; ``hash_paths`` is measured with 1, 2 and 4 threads (``--threads``). Validation:
``load_manifest`` of the TensorRT 10 example predicate against the baseline ``json.loads`` of its text;
``diff_manifests`` of two manifests that differ in four classified ways.
"""

from __future__ import annotations

import argparse
import copy
import functools
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Only the stdlib-based hashing module is imported here, so that `--only hashing` runs where pydantic is
# not installed (the GPU machine); the model part imports the rest when it runs.
from trtguard.release.manifest._hashing import hash_paths

EXAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "202-manifest-trt10-weak-int8.json"
MIB = 1024 * 1024


def _median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _write(path: Path, size: int) -> None:
    block = os.urandom(MIB)
    with path.open("wb") as stream:
        for _ in range(size // MIB):
            stream.write(block)
        stream.write(block[: size % MIB])


def _sequential(paths: list[Path]) -> None:
    for path in paths:
        hasher = hashlib.sha256()
        with path.open("rb") as stream:
            while chunk := stream.read(4 * MIB):
                hasher.update(chunk)


def bench_hashing(
    folder: Path, files: int, file_mib: int, dataset_files: int, repeat: int, threads: list[int]
) -> None:
    big = [folder / f"part-{index}.bin" for index in range(files)]
    for path in big:
        _write(path, file_mib * MIB)
    dataset = folder / "dataset"
    for index in range(dataset_files):
        shard = dataset / f"shard-{index % 16:02d}"
        shard.mkdir(parents=True, exist_ok=True)
        (shard / f"{index:05d}.npy").write_bytes(os.urandom(64 * 1024))
    total = files * file_mib
    dataset_mib = dataset_files * 64 / 1024
    _sequential(big)  # warm the page cache
    print(f"hashing {files} x {file_mib} MiB files ({total} MiB), median of {repeat}, {os.cpu_count()} CPUs")
    baseline = _median_seconds(lambda: _sequential(big), repeat)
    print(f"  baseline: sequential hashlib loop       {baseline:7.2f} s  {total / baseline:8.0f} MiB/s")
    labels = {f"file {index}": path for index, path in enumerate(big)}
    for workers in threads:
        seconds = _median_seconds(
            functools.partial(hash_paths, labels, workers=workers, progress_stream=None), repeat
        )
        print(
            f"  hash_paths, {workers} thread(s)               {seconds:7.2f} s  {total / seconds:8.0f} MiB/s"
            f"  ({baseline / seconds:.2f}x baseline)"
        )
    print(f"tree hash of {dataset_files} files x 64 KiB ({dataset_mib:.0f} MiB), median of {repeat}")
    tree_files = sorted(dataset.rglob("*.npy"))
    baseline = _median_seconds(lambda: _sequential(tree_files), repeat)
    print(f"  baseline: sequential hashlib loop       {baseline:7.2f} s  {dataset_mib / baseline:8.0f} MiB/s")
    for workers in threads:
        seconds = _median_seconds(
            functools.partial(hash_paths, {"dataset": dataset}, workers=workers, progress_stream=None), repeat
        )
        print(
            f"  trtguard-tree-v1, {workers} thread(s)         {seconds:7.2f} s  "
            f"{dataset_mib / seconds:8.0f} MiB/s  ({baseline / seconds:.2f}x baseline)"
        )


def bench_model(iterations: int) -> None:
    from verifier.manifest import load_manifest  # noqa: PLC0415 (see the note at the imports)
    from verifier.manifest_diff import diff_manifests  # noqa: PLC0415

    text = EXAMPLE.read_text()
    document = json.loads(text)
    changed = copy.deepcopy(document)
    changed["toolchain"]["tensorrt_version"] = "10.8.0.43"
    changed["builder_config"]["optimization_profiles"][0]["inputs"]["images"]["max"] = [64, 3, 224, 224]
    changed["accuracy"][0]["value"] = 0.75
    old, new = load_manifest(document, "old"), load_manifest(changed, "new")

    def per_call(run: Callable[[], object]) -> float:
        samples = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(iterations):
                run()
            samples.append((time.perf_counter() - started) / iterations)
        return statistics.median(samples) * 1e6

    baseline = per_call(lambda: json.loads(text))
    validate = per_call(lambda: load_manifest(document, "bench"))
    diff = per_call(lambda: diff_manifests(old, new))
    print(f"manifest model, median per call over 5 x {iterations} calls")
    print(f"  baseline: json.loads of the predicate  {baseline:8.1f} us")
    print(
        f"  load_manifest (validate)               {validate:8.1f} us  ({validate / baseline:.1f}x baseline)"
    )
    print(f"  diff_manifests (4 kinds of change)     {diff:8.1f} us  ({diff / baseline:.1f}x baseline)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--file-mib", type=int, default=256)
    parser.add_argument("--dataset-files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--threads", default="1,2,4", help="comma-separated thread counts for hash_paths")
    parser.add_argument("--only", choices=("hashing", "model"))
    args = parser.parse_args()
    threads = [int(count) for count in args.threads.split(",")]
    if args.only != "model":
        with tempfile.TemporaryDirectory(prefix="trtguard-bench-") as folder:
            bench_hashing(Path(folder), args.files, args.file_mib, args.dataset_files, args.repeat, threads)
    if args.only != "hashing":
        bench_model(args.iterations)


if __name__ == "__main__":
    main()
