#!/usr/bin/env bash
# Everything the engine verifier does on the GPU machine, in one `run` call (docs/gpu-verification.md):
# install the carried wheels, record the environment, run the engine test suite (GPU tests included),
# record verify-engine's reports on every public plan, and run both benchmarks. Logs go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/trtguard-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/engine/*.whl > "$OUT/environment.txt" 2>&1 || { cat "$OUT/environment.txt"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD
export TRTGUARD_SHARED_FIXTURES=$PWD/.run/engine-fixtures
{
    echo "== nvidia-smi"; nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
    echo "== /proc/driver/nvidia/version"; cat /proc/driver/nvidia/version
    echo "== python"; python3 --version; uname -r; nproc
    python3 -c "import tensorrt_lean_bindings as t; print('tensorrt_lean_bindings', t.__version__)"
    python3 -c "import pydantic, cryptography; print('pydantic', pydantic.VERSION, 'cryptography', cryptography.__version__)"
} >> "$OUT/environment.txt" 2>&1

echo "== pytest tests/verifier/engine (GPU tests included)"
# test_k8s_example.py validates a YAML example against Kubernetes schemas (kubernetes-validate, not carried,
# no GPU involved); it runs in CI. `python -m trtguard verify-engine` loads only its own command's module, so
# test_installed_command runs here too. The registry and webhook fixtures (plugins of tests/conftest.py) need
# packages that are not carried, and no engine test uses them.
timeout 300 python3 -m pytest tests/verifier/engine -v -rs -p no:cacheprovider \
    -p no:tests.support.registries -p no:tests.support.webhooks \
    --ignore tests/verifier/engine/test_k8s_example.py 2>&1 | tee "$OUT/pytest.log" | tail -40

echo "== verify-engine --gpu on every public plan and on broken files"
timeout 240 python3 tests/verifier/engine/gpu_run/gpu_probe.py "$TRTGUARD_SHARED_FIXTURES" "$OUT" 2>&1 | tee "$OUT/probe.log"

echo "== bench: time to the first GPU answer"
timeout 180 python3 bench/gpu_first_answer.py --runs 5 \
    --engine "$TRTGUARD_SHARED_FIXTURES/tensorrt/plans/sampleMNIST.trt10.5.0.18.engine" 2>&1 | tee "$OUT/bench_gpu_first_answer.txt"

echo "== bench: hashing throughput (2 GiB)"
timeout 240 python3 bench/hash_throughput.py --runs 3 2>&1 | tee "$OUT/bench_hash_throughput.txt"
