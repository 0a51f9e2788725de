"""`python -m helpers.models.toygpu ...` starts the device process (the driver does this, not you)."""

import sys

from helpers.models.toygpu.device import main

sys.exit(main())
