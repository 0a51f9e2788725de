"""Measurement primitives the chapters share: CuPy access is in core.gpu; here are host buffers,
event-timed copies, the machine's sysfs report, the CUDA driver API and sandboxed child processes."""
