"""``python -m trtguard.demo`` (``make demo``): the scripted demo of :mod:`trtguard.demo.run`."""

import sys

from trtguard.demo.run import main

sys.exit(main())
