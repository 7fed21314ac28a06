"""FAKE GPU child (GPU machines only): creates a CUDA context through the driver API, then crashes with it
held (tests that the parent survives a child that dies with live CUDA state)."""

import ctypes
import sys

cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
device = ctypes.c_int()
assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
context = ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
assert cuda.cuCtxSetCurrent(context) == 0
memory = ctypes.c_uint64()
assert cuda.cuMemAlloc_v2(ctypes.byref(memory), ctypes.c_size_t(64 * 1024 * 1024)) == 0
print("fake child: CUDA context and 64 MiB allocated; crashing", file=sys.stderr, flush=True)
ctypes.string_at(0)
