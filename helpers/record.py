"""`python -m helpers.record`: the recorder's command line (see helpers.recording.recorder)."""

import sys

from helpers.recording.recorder import main

if __name__ == "__main__":
    sys.exit(main())
