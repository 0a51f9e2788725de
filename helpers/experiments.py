"""The registry of experiments the recorder runs on a real GPU.

A chapter adds an experiment by decorating a function in its helpers module:

    @experiment("transfers.pinned_vs_pageable", chapter=0, title="...")
    def pinned_vs_pageable(quick: bool) -> dict: ...

The function runs live, returns JSON-serialisable data, and that dict is what replay mode
later reads back through `helpers.reference`. `discover()` imports every helpers module so
their decorators run; nothing else needs editing when a chapter is added.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

_REGISTRY: dict[str, Experiment] = {}


@dataclass(frozen=True)
class Experiment:
    """A registered live experiment: an id, the chapter that shows it, and its runner."""

    id: str
    chapter: int
    title: str
    run: Callable[[bool], dict]  # run(quick) -> JSON-serialisable data


def experiment(id: str, *, chapter: int, title: str):
    """Register the decorated function as the live experiment `id`."""
    if not id or not id.replace(".", "").replace("_", "").isalnum():
        raise ValueError(f"experiment id must be dotted words, got {id!r}")

    def wrap(fn: Callable[[bool], dict]) -> Callable[[bool], dict]:
        existing = _REGISTRY.get(id)
        if existing and existing.run.__qualname__ != fn.__qualname__:
            raise ValueError(f"experiment {id!r} is registered twice")
        _REGISTRY[id] = Experiment(id, chapter, title, fn)
        return fn

    return wrap


def discover() -> dict[str, Experiment]:
    """Import every helpers module (so their experiments register) and return the registry."""
    import helpers

    for mod in pkgutil.iter_modules(helpers.__path__):
        if not mod.name.startswith("_") and mod.name != "record":
            importlib.import_module(f"helpers.{mod.name}")
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (kv[1].chapter, kv[0])))
