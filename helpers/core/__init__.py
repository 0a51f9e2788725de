"""The course's core: context and mode, the one evidence contract, the experiment registry,
reference files and the recorder, errors and input validation, figures, tables and widgets.
It knows no chapter."""
