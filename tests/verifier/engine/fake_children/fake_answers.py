"""FAKE GPU child: prints the canned answer in $FAKE_CHILD_ANSWER (a JSON file), with the engine hash it
was given, as if TensorRT had loaded the engine; writes its arguments to $FAKE_CHILD_ARGV when set. Tests
the parent's comparisons and the attestation on a machine without a GPU; it says nothing about TensorRT."""

import json
import os
import sys
from pathlib import Path

args = sys.argv[1:]
if "FAKE_CHILD_ARGV" in os.environ:
    Path(os.environ["FAKE_CHILD_ARGV"]).write_text(json.dumps(args))
answer = json.loads(Path(os.environ["FAKE_CHILD_ANSWER"]).read_text())
answer.setdefault("engine_sha256", args[args.index("--sha256") + 1])
sys.stdout.write(json.dumps(answer) + "\n")
