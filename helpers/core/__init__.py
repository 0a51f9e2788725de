"""The evidence core: configuration and mode, the one evidence contract (`ctx.get` -> Evidence),
the experiment registry, recordings and how they are read (reference files, kernel-lab
transcripts, provenance labels), errors and input validation. It knows no chapter and imports
nothing above it: measure and models build on it, presentation and learning aids on those
(pyproject.toml's import contract)."""
