"""``python -m trtguard.demo`` (``make demo``): the scripted demo of :mod:`trtguard.demo._run`."""

import sys

from trtguard.demo._run import main

sys.exit(main())
