"""`python -m tools.grader student|grade|run-student|lint ...`: the grader's command line (labgrade)."""

import sys

from tools.grader.labgrade import main

sys.exit(main())
