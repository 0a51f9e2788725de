"""Shown code has one source: the package. A notebook cell that shows measuring code is written
from the package's text by this tool, never by hand.

A chapter page shows the CuPy/Numba function an experiment runs (the default of its `code`
parameter, see helpers.core.experiments), so the learner reads, runs and changes the very code
that made the recording. That function lives once, in its package module, where the recorder,
the tests and ruff see it. The page's cell starts with one marker line per module it shows:

    #@shown helpers.ch00_your_machine.copy_sweeps: time_copy
    #@shown helpers.measure._chase_kernel: chase

and the rest of the cell is generated: each named top-level definition, decorators included, in
the order named, copied line for line from the module's file and separated by two blank lines.
The module is read as text (ast), never imported, so generation needs no GPU, CuPy or Numba.

    python -m tools.shown            # rewrite every marked cell of notebooks/*.ipynb (make shown)
    python -m tools.shown --check    # exit 1, naming each cell, if rewriting would change anything

Errors name the notebook and the cell (its index and id): a malformed marker, a module that is
not in the course's `helpers` package (a page is public: never tools/ or instructor/) or does
not parse, a name it does not define at top level, or two marked
cells of one notebook showing the same name (the second would silently replace the first in the
page's namespace). A learner's edits to a cell in their own copy are theirs to run
(helpers.core.evidence says "your changed ..."); an edit committed to the course's notebook is
what `--check` refuses: change the package instead and run `make shown`.
"""
