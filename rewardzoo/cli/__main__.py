"""``python -m rewardzoo.cli``."""

import sys

from .commands import main

if __name__ == "__main__":  # importing the module (the installed-package check imports every one) runs nothing
    sys.exit(main())
