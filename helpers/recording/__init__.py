"""The recording layer: what writes data/reference (helpers.core only reads it).

- `live`: the provenance of a measurement made now on this machine's GPU (driver, CUDA, packages,
  date, git commit, who recorded it), from the system report (helpers.measure);
- `store`: one file per experiment under a folder per machine with its manifest, written
  atomically, each checksummed and read back through the loader before it counts;
- `recorder`: `python -m helpers.record`, which runs the registered experiments live and stores them;
- `split`: `python -m helpers.record --split OLD.json`, which moved the whole-machine files of
  recorder 0.1 (schema 1) into that layout without measuring anything again.

Layer: evidence core (helpers.core) -> measure, models -> recording -> presentation -> ...;
nothing in helpers.core imports this package.
"""
