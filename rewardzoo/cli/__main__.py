"""``python -m rewardzoo.cli``."""

import sys

from .commands import main

sys.exit(main())
