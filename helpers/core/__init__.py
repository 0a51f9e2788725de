"""The course's core: context and mode, the one evidence contract, the experiment registry,
reading the recordings (helpers.recording writes them), errors and input validation, figures, tables, widgets and checks.
It knows no chapter."""
