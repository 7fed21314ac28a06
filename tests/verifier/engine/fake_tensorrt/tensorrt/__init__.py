"""FAKE ``tensorrt`` module: records that it was imported (in $FAKE_TENSORRT_MARKER) and refuses to work.

Put on PYTHONPATH by the no-GPU test: the real child must report "no GPU" without importing a TensorRT
module, let alone creating a Runtime.
"""

import os
from pathlib import Path

Path(os.environ["FAKE_TENSORRT_MARKER"]).write_text("imported")


class Runtime:
    def __init__(self, logger: object) -> None:
        Path(os.environ["FAKE_TENSORRT_MARKER"]).write_text("Runtime created")
        raise RuntimeError("fake tensorrt: a Runtime must not be created without a GPU")
