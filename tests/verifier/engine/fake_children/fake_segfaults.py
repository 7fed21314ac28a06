"""FAKE GPU child: dereferences NULL, as a crash in native code would (tests the supervisor)."""

import ctypes
import sys

print("fake child: about to crash in native code", file=sys.stderr, flush=True)
ctypes.string_at(0)
