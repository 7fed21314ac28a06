"""FAKE GPU child: answers, exits, and leaves a grandchild that holds the pipes open (tests that the
supervisor returns and kills the grandchild with the process group)."""

import json
import os
import subprocess
import sys
from pathlib import Path

args = sys.argv[1:]
sha256 = args[args.index("--sha256") + 1]
marker = os.environ["FAKE_GRANDCHILD_PIDFILE"]
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
Path(marker).write_text(str(grandchild.pid))
answer = {
    "protocol": 1,
    "status": "no_gpu",
    "message": "no GPU: fake",
    "timings": {},
    "engine_sha256": sha256,
}
sys.stdout.write(json.dumps(answer) + "\n")
sys.stdout.flush()
os._exit(0)
