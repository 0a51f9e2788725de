"""tools/matrix: see CONTRIBUTING.md, "Tools"."""
