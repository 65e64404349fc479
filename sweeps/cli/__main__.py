"""``python -m sweeps.cli``: the tsweep console script."""

import sys

from . import main

sys.exit(main())
