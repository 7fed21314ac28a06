"""``python -m trtguard`` runs the ``trtguard`` command line."""

import sys

from trtguard.cli import main

sys.exit(main())
