"""FAKE GPU child: prints bytes that are not an answer and exits 0 (tests the supervisor's parsing)."""

import sys

sys.stdout.buffer.write(b"\x00\xffgarbage {not json\n")
