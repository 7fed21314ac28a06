"""FAKE GPU child: ignores SIGTERM and never answers (tests the supervisor's time limit)."""

import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("fake child: hanging", file=sys.stderr, flush=True)
while True:
    time.sleep(60)
