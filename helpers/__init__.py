"""Helpers shared by every notebook and lab of the course.

The layout shows the architecture (CONTRIBUTING.md has the rules):
- `course.py`: the notebook's entry, `course.start()` -> a Context whose `ctx.get(id, **params)`
  is the one way to get an experiment's data (live or replayed, as Evidence);
- `core/`: the context's machinery (mode, evidence contract, experiment registry, reading the
  recordings, errors and validators, configuration, figures and checks);
- `recording/`: what writes data/reference (the recorder, one file per experiment per machine);
- `measure/`: measurement primitives several chapters share (host buffers, event-timed copies,
  the system report, the CUDA driver API, a sandbox);
- `models/`: the software models (copy cost, toy GPU, TTM, buddy allocator, routes);
- `chNN_topic/`: one package per chapter, with its experiments and views;
- `labs/`: what the labs need beyond that; `record.py`: `python -m helpers.record`.

Importing this package is cheap and never touches the GPU: CuPy is imported only when an
experiment needs it, so the course also runs on machines without CUDA.
"""

__version__ = "0.1.0"
