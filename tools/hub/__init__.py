"""tools/hub: see CONTRIBUTING.md, "Tools"."""
