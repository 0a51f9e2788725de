"""`python -m helpers.toygpu ...` starts the device process (the driver does this, not you)."""

import sys

from .device import main

sys.exit(main())
