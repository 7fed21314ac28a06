"""The GPU child: deserializes one engine with TensorRT and prints what the engine says, as one JSON object.

Started by :mod:`verifier.engine._runtime` as ``python child.py --engine PATH --sha256 HEX …`` in a process of
its own (never forked from a process that may hold CUDA state), with a time limit, so that a crash, a hang or
a CUDA error in native code ends this process and not the caller. It is run as a script, not as part of the
``verifier`` package, and uses the standard library only: nothing but TensorRT and the driver is loaded
next to the engine.

Protocol: the result is written to the original standard output as one JSON object followed by a newline;
everything else (TensorRT's own printing, Python warnings, faulthandler's traceback on a crash) goes to
standard error, which the parent keeps a tail of. The process then ends with ``os._exit(0)`` so that no
TensorRT or CUDA destructor runs after the answer is out.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import hashlib
import importlib
import json
import os
import re
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROTOCOL = 1
#: Modules tried in order. ``tensorrt_lean_bindings`` is what the ``tensorrt-lean-cu13-bindings`` wheel
#: installs; the thin ``tensorrt_lean`` package of ``tensorrt-lean-cu13`` only re-exports it.
RUNTIME_MODULES = ("tensorrt", "tensorrt_lean", "tensorrt_lean_bindings")
_MAX_LOG_MESSAGES = 200
_MAX_MESSAGE_CHARS = 4000
_MAX_INSPECTOR_CHARS = 8 * 1024 * 1024
# cuDeviceGetAttribute numbers (cuda.h, CUdevice_attribute).
_CC_MAJOR = 75
_CC_MINOR = 76


def _isolate_stdout() -> int:
    """Keep the original stdout for the result and point fd 1 at stderr for everything else."""
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return result_fd


def _cuda_error(lib: Any, code: int) -> str:
    name = ctypes.c_char_p()
    text = ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(name))
    lib.cuGetErrorString(code, ctypes.byref(text))
    label = name.value.decode() if name.value else f"CUresult {code}"
    return f"{label} ({text.value.decode()})" if text.value else label


def _driver_version(lib: Any) -> str | None:
    """The kernel driver's version (``nvidia-smi``'s "Driver Version")."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    match = re.search(r"Kernel Module(?: for [^ ]+)?\s+([0-9][0-9.]+)", text)
    if match:
        return match.group(1)
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        smi = None
    if smi is not None and smi.returncode == 0 and smi.stdout.strip():
        return smi.stdout.strip().splitlines()[0].strip()
    version = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
        return f"CUDA {version.value // 1000}.{version.value % 1000 // 10} driver"
    return None


def probe_gpu() -> dict[str, Any]:
    """Ask the CUDA driver (``libcuda.so.1`` through ctypes) for device 0, the one TensorRT will use.

    Nothing TensorRT is loaded here: when this finds no GPU, no Runtime is ever created.
    """
    nodes = sorted(str(node) for node in Path("/dev").glob("nvidia[0-9]*"))
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return {
            "available": False,
            "reason": f"the NVIDIA driver library libcuda.so.1 cannot be loaded ({error})",
            "device_nodes": nodes,
        }
    code = lib.cuInit(0)
    if code != 0:
        return {
            "available": False,
            "reason": f"cuInit failed: {_cuda_error(lib, code)}",
            "device_nodes": nodes,
        }
    count = ctypes.c_int()
    code = lib.cuDeviceGetCount(ctypes.byref(count))
    if code != 0 or count.value < 1:
        reason = _cuda_error(lib, code) if code else "the driver reports 0 devices"
        return {"available": False, "reason": f"no CUDA device: {reason}", "device_nodes": nodes}
    device = ctypes.c_int()
    code = lib.cuDeviceGet(ctypes.byref(device), 0)
    if code != 0:
        return {
            "available": False,
            "reason": f"cuDeviceGet(0) failed: {_cuda_error(lib, code)}",
            "device_nodes": nodes,
        }
    name = ctypes.create_string_buffer(256)
    major = ctypes.c_int()
    minor = ctypes.c_int()
    memory = ctypes.c_size_t()
    lib.cuDeviceGetName(name, 256, device)
    lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, device)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, device)
    lib.cuDeviceTotalMem_v2(ctypes.byref(memory), device)
    return {
        "available": True,
        "reason": None,
        "device_nodes": nodes,
        "count": count.value,
        "name": name.value.decode(errors="replace"),
        "compute_capability": f"{major.value}.{minor.value}",
        "total_memory": memory.value,
        "driver_version": _driver_version(lib),
    }


def import_runtime() -> tuple[Any, str | None, list[str]]:
    """The first TensorRT module that imports, its name, and why the others did not."""
    errors: list[str] = []
    for name in RUNTIME_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            errors.append(f"{name}: {error}")
            continue
        return module, name, errors
    return None, None, errors


def make_logger(trt: Any) -> Any:
    """An ``ILogger`` that keeps TensorRT's messages (INFO and above) for the report."""

    class CapturingLogger(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)  # pybind11 needs the base initialised explicitly
            self.messages: list[dict[str, str]] = []
            self.dropped = 0

        def log(self, severity: Any, msg: str) -> None:
            name = getattr(severity, "name", str(severity))
            if name == "VERBOSE":
                return
            if len(self.messages) >= _MAX_LOG_MESSAGES:
                self.dropped += 1
                return
            self.messages.append({"severity": name, "message": str(msg)[:_MAX_MESSAGE_CHARS]})

    return CapturingLogger()


def _enum_name(value: Any) -> str:
    return str(getattr(value, "name", value))


def _dims(value: Any) -> list[int]:
    return [int(dim) for dim in value]


def describe_engine(engine: Any) -> dict[str, Any]:
    """I/O tensors, optimization profiles and engine-wide facts, through the ``ICudaEngine`` API only."""
    unavailable: list[str] = []

    def attribute(name: str, convert: Callable[[Any], Any]) -> Any:
        try:
            return convert(getattr(engine, name))
        except (AttributeError, TypeError, RuntimeError) as error:
            unavailable.append(f"{name}: {type(error).__name__}: {error}")
            return None

    tensors: list[dict[str, Any]] = []
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        tensors.append(
            {
                "name": name,
                "mode": _enum_name(engine.get_tensor_mode(name)),
                "dtype": _enum_name(engine.get_tensor_dtype(name)),
                "shape": _dims(engine.get_tensor_shape(name)),
                "format": str(engine.get_tensor_format_desc(name)),
                "location": _enum_name(engine.get_tensor_location(name)),
                "shape_tensor": bool(engine.is_shape_inference_io(name)),
            }
        )
    profiles: list[dict[str, Any]] = []
    for profile in range(engine.num_optimization_profiles):
        inputs: dict[str, Any] = {}
        for tensor in tensors:
            if tensor["mode"] != "INPUT":
                continue
            low, mid, high = engine.get_tensor_profile_shape(tensor["name"], profile)
            entry: dict[str, Any] = {"min": _dims(low), "opt": _dims(mid), "max": _dims(high)}
            if tensor["shape_tensor"]:
                low_v, mid_v, high_v = engine.get_tensor_profile_values(tensor["name"], profile)
                entry["values"] = {"min": _dims(low_v), "opt": _dims(mid_v), "max": _dims(high_v)}
            inputs[tensor["name"]] = entry
        profiles.append({"inputs": inputs})
    device_memory = attribute("device_memory_size_v2", int)
    if device_memory is None:
        device_memory = attribute("device_memory_size", int)  # TensorRT < 10
    return {
        "name": attribute("name", str),
        "num_layers": attribute("num_layers", int),
        "io_tensors": tensors,
        "optimization_profiles": profiles,
        "hardware_compatibility_level": attribute("hardware_compatibility_level", _enum_name),
        "profiling_verbosity": attribute("profiling_verbosity", _enum_name),
        "engine_capability": attribute("engine_capability", _enum_name),
        "device_memory_size": device_memory,
        "refittable": attribute("refittable", bool),
        "unavailable": unavailable,
    }


def inspect_layers(trt: Any, module_name: str, engine: Any) -> dict[str, Any]:
    """The engine inspector's JSON, where this TensorRT module can create an inspector from Python."""
    if not hasattr(trt, "EngineInspector") or not hasattr(trt, "LayerInformationFormat"):
        return {
            "available": False,
            "reason": f"{module_name} has no EngineInspector binding (the lean runtime exports none), "
            "so per-layer precision cannot be read",
            "information": None,
        }
    try:
        inspector = engine.create_engine_inspector()
        information = str(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
    except (TypeError, RuntimeError, AttributeError) as error:
        return {
            "available": False,
            "reason": f"the engine inspector failed: {type(error).__name__}: {error}",
            "information": None,
        }
    if len(information) > _MAX_INSPECTOR_CHARS:
        return {
            "available": False,
            "reason": f"the inspector's JSON is larger than {_MAX_INSPECTOR_CHARS} characters",
            "information": None,
        }
    return {"available": True, "reason": None, "information": information}


def _runtime_module_version(trt: Any) -> str:
    return str(getattr(trt, "__version__", "unknown"))


def run(args: argparse.Namespace, result: dict[str, Any], timings: dict[str, float]) -> None:
    """Everything after argument parsing; fills in ``result`` as it goes, so that an exception part-way
    still leaves what was learnt before it."""
    started = time.monotonic()
    gpu = probe_gpu()
    timings["probe_gpu_s"] = time.monotonic() - started
    result["gpu"] = gpu
    if not gpu["available"]:
        result.update(status="no_gpu", message=f"no GPU: {gpu['reason']}")
        return

    mark = time.monotonic()
    path = Path(args.engine)
    size = path.stat().st_size
    data = bytearray(size)
    with path.open("rb", buffering=0) as stream:
        view = memoryview(data)
        done = 0
        while done < size:
            count = stream.readinto(view[done:])
            if not count:
                break
            done += count
    del data[done:]
    sha256 = hashlib.sha256(data).hexdigest()
    timings["read_s"] = time.monotonic() - mark
    result["engine_sha256"] = sha256
    if sha256 != args.sha256:
        # The file changed after the parent hashed it; never deserialize bytes nobody checked.
        result.update(
            status="rejected",
            message=f"the engine file changed after it was verified: its SHA-256 is now {sha256}",
        )
        return

    mark = time.monotonic()
    trt, module_name, import_errors = import_runtime()
    timings["import_s"] = time.monotonic() - mark
    if trt is None or module_name is None:
        result.update(
            status="no_runtime",
            message="no TensorRT runtime module could be imported: " + "; ".join(import_errors),
        )
        return
    result["runtime"] = {"module": module_name, "version": _runtime_module_version(trt)}

    mark = time.monotonic()
    logger = make_logger(trt)
    runtime = trt.Runtime(logger)
    result["log"] = logger.messages
    if runtime is None:
        result.update(status="error", message="TensorRT could not create a Runtime")
        return
    if args.allow_host_code:
        # Only requested by the parent once the engine's hash and its manifest's signature have passed.
        runtime.engine_host_code_allowed = True
    if args.tmpdir:
        runtime.temporary_directory = args.tmpdir
    timings["runtime_s"] = time.monotonic() - mark

    mark = time.monotonic()
    engine = runtime.deserialize_cuda_engine(data)
    timings["deserialize_s"] = time.monotonic() - mark
    result["log_dropped"] = logger.dropped
    if engine is None:
        errors = [m["message"] for m in logger.messages if m["severity"] in ("ERROR", "INTERNAL_ERROR")]
        result.update(
            status="deserialize_failed",
            message=errors[-1] if errors else "deserialize_cuda_engine returned None and logged no error",
        )
        return

    mark = time.monotonic()
    result["engine"] = describe_engine(engine)
    result["inspector"] = inspect_layers(trt, module_name, engine)
    timings["describe_s"] = time.monotonic() - mark
    result["log_dropped"] = logger.dropped
    result.update(status="ok", message="the engine deserialized")


def main(argv: list[str]) -> None:
    """Run the child; never returns."""
    started = time.monotonic()
    result_fd = _isolate_stdout()
    faulthandler.enable(file=sys.stderr, all_threads=True)
    # A crash is reported by the parent from the exit signal; a core file would only fill the disk.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    parser = argparse.ArgumentParser(prog="trtguard-gpu-child")
    parser.add_argument("--engine", required=True)
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--allow-host-code", action="store_true")
    parser.add_argument("--tmpdir")
    args = parser.parse_args(argv)
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"protocol": PROTOCOL, "status": "error", "message": "", "timings": timings}
    try:
        run(args, result, timings)
    except Exception as error:  # reported, never hidden: the parent turns this into a failed check
        result.update(
            status="error",
            message=f"{type(error).__name__}: {error}",
            traceback=traceback.format_exc()[-_MAX_MESSAGE_CHARS:],
        )
    timings["total_s"] = time.monotonic() - started
    payload = (json.dumps(result, separators=(",", ":")) + "\n").encode()
    view = memoryview(payload)
    while view:
        written = os.write(result_fd, view)
        view = view[written:]
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
