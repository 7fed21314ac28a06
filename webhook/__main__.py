"""``python -m webhook`` runs the ``trtguard`` command line."""

import sys

from webhook._cli import main

sys.exit(main())
