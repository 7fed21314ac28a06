"""FAKE GPU child: writes to stdout without end (tests the supervisor's output limit)."""

import sys

chunk = b"x" * 65536
while True:
    sys.stdout.buffer.write(chunk)
