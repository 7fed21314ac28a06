"""Record what ``verify-engine --gpu`` says about every public plan and some broken files (GPU machine).

Not a test: run by run_on_gpu.sh to produce the transcript quoted in docs/gpu-verification.md. Each file gets
a build manifest signed with a fresh key (so that the hash gate passes and the engine really reaches
TensorRT); the reports are written as text and JSON to the folder given.

    python3 tests/verifier/engine/gpu_run/gpu_probe.py FIXTURES_DIR OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO))

from tests.verifier.engine.helpers import LEGACY_VERSIONS, PLANS, manifest_for, sign_manifest  # noqa: E402
from verifier.crypto._keys import generate_private_key  # noqa: E402
from verifier.engine import GpuOptions, VerifyRequest, load_signed_manifest, verify_engine  # noqa: E402


def main(fixtures: Path, out: Path) -> int:
    key = generate_private_key()
    keys = {"builder": key.public_key()}
    plans = fixtures / "tensorrt" / "plans"
    mnist = (plans / "sampleMNIST.trt10.5.0.18.engine").read_bytes()
    texts: list[str] = []
    documents: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="trtguard-gpu-probe-") as folder:
        scratch = Path(folder)
        cases: list[tuple[str, Path, dict[str, str] | None]] = [
            (name, plans / name, None) for name in sorted(PLANS)
        ]
        broken = {
            "truncated-4096.plan": mnist[:4096],
            "padded-4096.plan": mnist + bytes(4096),
            "random-65536.bin": os.urandom(65536),
            "empty.plan": b"",
        }
        for name, data in broken.items():
            (scratch / name).write_bytes(data)
            cases.append((name, scratch / name, None))
        cases.append(
            (
                "sampleMNIST with CUDA_VISIBLE_DEVICES='' (no GPU)",
                plans / "sampleMNIST.trt10.5.0.18.engine",
                {"CUDA_VISIBLE_DEVICES": ""},
            )
        )
        for label, path, env in cases:
            version = PLANS.get(path.name) or LEGACY_VERSIONS.get(path.name, "10.5.0.18")
            envelope = scratch / f"{path.name}.dsse.json"
            envelope.write_bytes(
                sign_manifest(manifest_for(path, **{"toolchain.tensorrt_version": version}), key).to_json()
            )
            options = GpuOptions(timeout_s=120, env={**os.environ, **env} if env else None)
            started = time.perf_counter()
            report = verify_engine(
                VerifyRequest(engine=path, manifest=load_signed_manifest(envelope, keys), gpu=options)
            )
            took = time.perf_counter() - started
            texts.append(f"===== {label} ({took:.2f} s in the caller)\n{report.render_text()}\n")
            documents.append({"case": label, "caller_seconds": round(took, 3), "report": report.to_json()})
            outcome = report.check("gpu.deserialize")
            print(f"{label}: {outcome.message if outcome else '?'}")
    (out / "probe.txt").write_text("\n".join(texts))
    (out / "probe.json").write_text(json.dumps(documents, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
