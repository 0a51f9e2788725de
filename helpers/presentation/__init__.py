"""How the course shows what it measured or modelled: figures and tables that carry their
provenance (figures), diagrams in one visual language (diagrams), a live result beside the
reference machine's (beside), ipywidgets output (widgets) and the course status page (status).

Presentation sits above the evidence core, measure, models and recording: it takes Evidence and
draws it, and nothing below imports it (pyproject.toml's import contract)."""
