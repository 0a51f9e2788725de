"""tools/checks: see CONTRIBUTING.md, "Tools"."""
