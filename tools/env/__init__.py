"""tools/env: see CONTRIBUTING.md, "Tools"."""
