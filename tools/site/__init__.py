"""tools/site: see CONTRIBUTING.md, "Tools"."""
