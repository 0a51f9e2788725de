"""Filling an ipywidgets Output without capturing, so no executor can stall on it.

`with out: display(...)` makes a headless executor (nbclient, which Jupyter Book and nbval
use) mimic the Output widget: it sends comm messages to the kernel on the shell socket while
it waits on that same socket for the cell's reply, and the reply's wake-up can be missed, so
the cell sits until the execution timeout (jupyter/nbclient#312). Writing the widget's
`outputs` state from the kernel needs no frontend and renders the same in JupyterLab.
"""

from __future__ import annotations

from typing import Any


def output_item(obj: Any) -> dict:
    """One nbformat output for `obj`: text becomes a stdout stream, anything else its MIME bundle."""
    if isinstance(obj, str):
        return {"output_type": "stream", "name": "stdout", "text": obj if obj.endswith("\n") else obj + "\n"}
    bundle = obj._repr_mimebundle_() if hasattr(obj, "_repr_mimebundle_") else {"text/plain": repr(obj)}
    if isinstance(bundle, tuple):  # (data, metadata), as IPython allows
        bundle = bundle[0]
    return {"output_type": "display_data", "data": bundle, "metadata": {}}


def show(out: Any, *items: Any) -> None:
    """Replace what the Output widget `out` shows with `items` (strings and displayable objects)."""
    out.outputs = tuple(output_item(i) for i in items)
