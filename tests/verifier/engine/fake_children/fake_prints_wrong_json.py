"""FAKE GPU child: prints valid JSON that is not a protocol-1 answer (tests the supervisor's validation)."""

import json

print(json.dumps({"protocol": 1, "status": "ok", "message": "all good", "timings": {}, "surprise": True}))
