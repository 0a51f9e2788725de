"""The tricks of issue 39 as planted submissions (tests/labs/test_redteam_more.py, tools/hub/classtime.py).

Each is the worked solution of a lab with some solution cells replaced: cloning the course's own
implementation past the in-process own-work check, patching that check away, returning a correct
answer in another Python type. Lab 6's tricks (an empty driver, the harness's frames) are data for
instructor.labs.lab6_checks and helpers/measure/kernel_vm/guest/lab6_harness.py, written there.
"""

from __future__ import annotations

from tests.labs import redteam

NOOP_OWN_WORK = '''
import contextlib, types
from helpers.labs.grading import integrity
integrity.own_work = lambda *a, **k: contextlib.nullcontext()   # the in-process check, patched away
def _clone(f):
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__)
'''

#: trick -> (lab, {solution cell: source}); the points each trick's parts are worth are the lab's
OWN_WORK = {
    "clone_fit": ("lab2", {"fit_line": NOOP_OWN_WORK + '''
from helpers.models import copy_cost
_fit = _clone(copy_cost.fit)
def fit_line(nbytes, times_s):
    f = _fit([int(x) for x in nbytes], [float(x) for x in times_s])
    return f.t0_s, f.bandwidth_Bps
'''}),
    "clone_doppler_map": ("lab3", {"range_doppler_code": NOOP_OWN_WORK + '''
from helpers.models.radar import dsp
_dm = _clone(dsp.doppler_map)
def range_doppler(xp, frame, mf):
    return _dm(xp, frame, mf)
'''}),
    "clone_summarize": ("lab3", {"deadline_report_code": NOOP_OWN_WORK + '''
from helpers.models.radar import metrics
_sm = _clone(metrics.summarize)
def deadline_report(latency_us, period_s, dropped):
    s = _sm(latency_us, period_s, dropped)
    return {**s, "ok": s["misses"] == 0 and s["dropped"] == 0}
'''}),
}

#: correct answers in other Python types: (lab, {cell: source}) — each must keep full marks
TYPES = {
    "numpy_results": ("lab2", {"timed_copy": '''
import numpy as np
def timed_copy(cuda, stream, dst, src, nbytes, kind):
    start, end = cuda.Event(), cuda.Event()
    start.record(stream)
    cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)
    end.record(stream)
    end.synchronize()
    return np.array(cuda.get_elapsed_time(start, end) / 1e3)   # a 0-d array
''', "fit_line": '''
def fit_line(nbytes, times_s):
    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    a = np.column_stack([1.0 / t, n / t])
    (t0, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return np.array([t0, 1.0 / inv_bw])                          # an array, not a tuple
'''}),
    "namedtuple_fit": ("lab2", {"fit_line": '''
from collections import namedtuple
Fit = namedtuple("Fit", "t0 bw")
def fit_line(nbytes, times_s):
    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    a = np.column_stack([1.0 / t, n / t])
    (t0, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    return Fit(np.float64(t0), np.float64(1.0 / inv_bw))        # a namedtuple of NumPy scalars
'''}),
}


def defaultdict_buddy() -> dict[str, str]:
    """Lab 4's worked Buddy with free_lists() returning a defaultdict of tuples."""
    src = redteam_solution("lab4", "buddy_impl")
    return {"buddy_impl": src + '''

import collections as _collections
_free_lists = Buddy.free_lists
def _as_defaultdict(self):
    out = _collections.defaultdict(list)
    for k, v in _free_lists(self).items():
        out[k] = tuple(v)
    return out
Buddy.free_lists = _as_defaultdict
'''}


def redteam_solution(lab: str, gid: str) -> str:
    """The worked solution cell `gid` of the instructor's source lab."""
    import json

    nb = json.loads(redteam.source(lab).read_text())
    for c in nb["cells"]:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid:
            return "".join(c["source"])
    raise KeyError(gid)


def parts_of(lab: str, cells: dict[str, str]) -> list:
    """The graded parts of `lab` that grade a function of `cells`."""
    from tools.grader.classrun import lab_parts

    funcs = {n for gid in cells for n, _ in redteam.FUNCTIONS[lab][gid]}
    return [p for p in lab_parts(lab) if funcs & set(p.functions)]
