"""Objects that hold memory the process must give back (pinned pages, mappings, registrations).

Each such class defines an idempotent `close()`; this mixin makes `with obj:` and garbage
collection call it, so a notebook cell that fails half-way still frees what it took.
"""

from __future__ import annotations


class Closing:
    """Mixin: `close()` on leaving a `with` block and, as a last resort, on garbage collection."""

    def close(self) -> None:  # pragma: no cover - each subclass frees its own resource
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown, a CUDA context already gone: nothing to do
            pass
