"""tools/dist: see CONTRIBUTING.md, "Tools"."""
