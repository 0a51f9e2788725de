"""The C cross-check's host-side tools: nvbw_compare sets the course's recordings beside NVIDIA's nvbandwidth
(`python -m tools.bwcheck.nvbw_compare`). The cross-check itself is package data: helpers/measure/bwcheck."""
