"""`python -m helpers.record`: the recorder's command line (see helpers.core.recorder)."""

import sys

from helpers.core.recorder import main

if __name__ == "__main__":
    sys.exit(main())
