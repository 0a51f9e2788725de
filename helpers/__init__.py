"""Helpers shared by every notebook and lab of the course.

One module per concept (mode detection, the system report, host buffers, transfer
measurement, reference data, the recorder, figures). Importing this package is cheap and
never touches the GPU: CuPy is imported only when an experiment needs it, so the course
also runs on machines without CUDA.
"""

__version__ = "0.1.0"
