"""FAKE GPU child: complains on stderr and exits with status 3 without an answer (tests the supervisor)."""

import sys

print("fake child: CUDA error 999 (unknown error)", file=sys.stderr)
sys.exit(3)
