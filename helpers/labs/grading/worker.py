"""The worker that runs one lab submission for the grader: `python -m helpers.labs.grading.worker`.

It runs inside the sandbox (tools/grader/sandbox.py) with the course's helpers read-only and
nothing of the instructor's, and does only this: define the learner's functions (the lab's
setup cell, then the learner's solution cells), then call them when the grader asks, with
the arguments the grader sends, and send back what they return, as data
(helpers.labs.grading.wire). It holds no hidden case, no expected value and no check: those stay in
the grader's process, which the learner's code cannot reach. The requests come on file
descriptor 3 and the replies go out on 4, one JSON object per line; the learner's prints go
to stdout/stderr, which the grader caps.

Requests:
- `{"op": "load", "setup": [source], "cells": {grade_id: source}, "types": ["module:Class", ...]}` → `{"op": "loaded", "errors": {...}}`
- `{"op": "call", "target": name or {"handle": h}, "attr": method, "args": [...], "kwargs": {...},
  "bind": {global name: callback name}, "keep": bool, "pick": index of an argument, "forbid": {...}}`
  → `{"op": "return", "value" | "handle" | "index": ...}` or
  `{"op": "raised", "types": [...], "message": ..., "where": ...}`; while the call runs, the worker
  may send `{"op": "callback", "name": ..., "args": [...]}` and reads the grader's
  `{"op": "answer", "value": ...}` or `{"op": "refused", "message": ...}`.
- `{"op": "bye"}`.
"""

from __future__ import annotations

import builtins
import importlib
import io
import json
import os
import sys
import traceback

from helpers.core.errors import CourseError
from helpers.labs.grading import remote, wire

REQUESTS_FD, REPLIES_FD = 3, 4
#: built-in and course exception classes, captured before any learner code runs (a learner
#: cannot make an exception of theirs look like one of these by naming a class ValueError)
BUILTIN_EXCEPTIONS = {name: obj for name, obj in vars(builtins).items()
                      if isinstance(obj, type) and issubclass(obj, BaseException)}
KNOWN_EXCEPTIONS = {**BUILTIN_EXCEPTIONS, **remote.course_exceptions()}


class GraderRefused(CourseError):  # noqa: N818 - what the learner's code sees
    """The grader refused a callback (wrong arguments to a stand-in)."""


class Worker:
    """The learner's namespace and the protocol loop."""

    def __init__(self, requests: io.BufferedReader, replies: io.BufferedWriter) -> None:
        self.requests, self.replies = requests, replies
        self.ns: dict = {"__name__": "__main__", "display": _no_display}
        self.handles: dict[int, object] = {}

    # -- protocol -------------------------------------------------------------------------
    def send(self, message: dict) -> None:
        self.replies.write(wire.dumps(message))
        self.replies.flush()

    def receive(self) -> dict | None:
        line = self.requests.readline()
        return json.loads(line) if line else None

    def callback(self, name: str, *args, **kwargs):
        """Ask the grader (a stand-in's question); its answer, decoded."""
        self.send({"op": "callback", "name": name, "args": wire.encode([remote.export(a) for a in args]),
                   "kwargs": wire.encode({k: remote.export(v) for k, v in kwargs.items()})})
        reply = self.receive()
        if reply is None:
            os._exit(0)
        if reply.get("op") != "answer":
            if reply.get("error"):  # the grader's device raised it: the learner's code meets the same class
                raise remote.rebuild(str(reply["error"]), str(reply.get("message", "")))
            raise GraderRefused(reply.get("message", "the grader refused"))
        return self.decode(reply.get("value"))

    def decode(self, data, memo: dict | None = None):
        """Data from the grader as values; stand-ins built here (one per `ref` within a request)."""
        memo = {} if memo is None else memo
        return wire.decode(data, lambda spec: remote.make(spec, self.callback, lambda d: self.decode(d, memo), memo))

    def serve(self) -> None:
        while (req := self.receive()) is not None:
            op = req.get("op")
            if op == "bye":
                return
            if op == "load":
                self.send({"op": "loaded", "errors": self.load(req.get("setup", []), req.get("cells", {}),
                                                               req.get("types", []))})
            elif op == "call":
                self.send(self.call(req))
            else:
                self.send({"op": "error", "message": f"unknown request {op!r}"})

    # -- the learner's code ---------------------------------------------------------------
    def load(self, setup: list[str], cells: dict[str, str], types: list[str] = ()) -> dict[str, str]:
        """Allow the lab's dataclasses on the wire (`types`, named by the grader), run the lab's
        setup cell(s), then every solution cell; the errors, per cell."""
        errors = {}
        try:
            wire.allow_named(types)
        except Exception as exc:  # noqa: BLE001 - reported to the grader, which stops this lab
            errors["setup types"] = _describe(exc)
        for i, src in enumerate(setup):
            try:
                exec(compile(src, f"<setup {i}>", "exec"), self.ns)  # noqa: S102 - the lab's own cell
            except Exception as exc:  # noqa: BLE001 - reported to the grader
                errors[f"setup {i}"] = _describe(exc)
        for gid, src in cells.items():
            try:
                exec(compile(src, f"<cell {gid}>", "exec"), self.ns)  # noqa: S102 - the learner's cell
            except Exception as exc:  # noqa: BLE001 - a broken cell fails the parts that need it
                errors[gid] = _describe(exc)
        return errors

    def _target(self, req: dict):
        t = req.get("target")
        obj = self.handles[t["handle"]] if isinstance(t, dict) else self.ns.get(t)
        if isinstance(t, str) and obj is None:
            raise NameError(f"name {t!r} is not defined: its solution cell did not define it")
        if req.get("attr"):
            obj = getattr(obj, req["attr"])
        return obj

    def call(self, req: dict) -> dict:
        saved = {}
        try:
            memo: dict = {}
            args = self.decode(req.get("args", []), memo)
            kwargs = self.decode(req.get("kwargs", {}), memo)
            for name, spec in (req.get("bind") or {}).items():
                saved[name] = self.ns.get(name, _MISSING)
                kind, cb = (spec.get("kind", "callback"), spec["cb"]) if isinstance(spec, dict) else ("callback", spec)
                self.ns[name] = self.decode(wire.encode(wire.remote(kind, name=cb)), memo)
            fn = self._target(req)
            with _forbidding(req.get("forbid"), req.get("what", str(req.get("target"))), fn):
                result = fn(*args, **kwargs)
            if req.get("pick") is not None:
                pool = args[int(req["pick"])]
                index = next((i for i, x in enumerate(pool) if x is result), None)
                return {"op": "return", "index": index}
            if req.get("keep"):
                h = len(self.handles) + 1
                self.handles[h] = result
                return {"op": "return", "handle": h}
            reply = {"op": "return", "value": wire.encode(remote.export(result))}
            if req.get("sync") is not None:  # an argument the call changed (a LabDriver's pointers)
                reply["synced"] = wire.encode(remote.export(args[int(req["sync"])]))
            return reply
        except Exception as exc:  # noqa: BLE001 - the learner's exception, described for the grader
            return {"op": "raised", **_describe(exc)}
        finally:
            for name, old in saved.items():
                if old is _MISSING:
                    self.ns.pop(name, None)
                else:
                    self.ns[name] = old


_MISSING = object()


def _no_display(*args, **kwargs) -> None:
    """`display` of a notebook: nothing to show in the worker."""


def _describe(exc: BaseException) -> dict:
    """An exception as data: the built-in classes it is an instance of, its message, where."""
    types_ = [c.__name__ for c in type(exc).__mro__ if KNOWN_EXCEPTIONS.get(c.__name__) is c]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell ")]
    where = f"in {frames[-1].name}, line {frames[-1].lineno}" if frames else ""
    try:
        message = str(exc)[:500]
    except Exception:  # noqa: BLE001 - a learner's __str__ that raises
        message = "(no message)"
    return {"types": types_, "name": type(exc).__name__[:80], "message": message, "where": where}


class _forbidding:  # noqa: N801 - a context manager
    """`integrity.own_work` around a call when the grader asks for it (`forbid`)."""

    def __init__(self, forbid: dict | None, what: str, fn) -> None:
        self.forbid, self.what, self.fn, self.cm = forbid or {}, what, fn, None

    def __enter__(self):
        if self.forbid:
            from helpers.labs.grading import integrity

            mods = {importlib.import_module(m): tuple(names) for m, names in self.forbid.items()}
            self.cm = integrity.own_work(self.what, self.fn, mods)
            self.cm.__enter__()
        return self

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc) if self.cm is not None else False


def main() -> int:
    requests = os.fdopen(REQUESTS_FD, "rb", buffering=0)
    replies = os.fdopen(REPLIES_FD, "wb")
    sys.stdin = open(os.devnull)  # noqa: SIM115 - for the process's life
    Worker(io.BufferedReader(requests), replies).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
