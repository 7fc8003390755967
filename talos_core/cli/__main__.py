"""``python -m talos_core.cli``: the ``talos`` command."""

import sys

from talos_core.cli import main

sys.exit(main())
