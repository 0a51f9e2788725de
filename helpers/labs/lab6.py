"""Lab 6: a VFIO user-space driver for QEMU's edu device, checked in the booted kernel.

The learner's driver functions (DRIVER_FUNCTIONS) run INSIDE the kernel lab's VM, never on
this machine: :func:`code_of` takes them from a namespace (their source, or on Python 3.11
their compiled code when no source is kept, as in the grader's worker), :func:`run` boots
the ``edu`` machine once and runs the checks of helpers/measure/kernel_vm/guest/lab6_harness.py on them,
part by part, each part in its own unprivileged process; the results stream out as the
parts finish, so a driver that makes QEMU stop the VM still gets the parts it finished and
an explanation for the rest.

The inputs of each part are drawn from a seed (:func:`inputs`): the notebook's examples use
published seeds; the grade uses seeds nobody has seen (instructor.labs.lab6.cases), so a
driver that hard-codes what it saw here earns nothing.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import marshal
import random
import sys
import textwrap

from helpers.core.errors import InputError, SkipExperiment
from helpers.measure import kernel_vm

PARTS = ("open", "identify", "factorial", "map", "dma", "refuse", "faults")
DRIVER_FUNCTIONS = ("open_device", "identify", "check_alive", "factorial", "map_buffer", "dma_to_device",
                    "dma_from_device", "safe_dma", "fault_addresses")
PART_FUNCTIONS = {"open": ("open_device",), "identify": ("identify", "check_alive"), "factorial": ("factorial",),
                  "map": ("map_buffer",), "dma": ("dma_to_device", "dma_from_device"), "refuse": ("safe_dma",),
                  "faults": ("fault_addresses",)}
PAGE = 4096
TIMEOUT_S = 420.0
MAIN = b"import sys\nimport lab6_harness\nsys.exit(lab6_harness.main())\n"
EXAMPLE_SEEDS = {p: 6000 + i for i, p in enumerate(PARTS)}
_CACHE: dict[str, dict] = {}


# ----------------------------------------------------------------------------- inputs
def inputs(part: str, rng: random.Random) -> dict:
    """One part's inputs drawn from `rng` (what the harness gives the driver and checks against)."""
    if part == "open":
        return {"alive": rng.getrandbits(32), "sentinel": rng.getrandbits(32)}
    if part == "identify":
        return {"values": [rng.getrandbits(32) for _ in range(3)], "sentinels": [rng.getrandbits(32) for _ in range(3)]}
    if part == "factorial":
        ns = rng.sample(range(13), 3)
        return {"n": ns, "sentinels": [(n + rng.randint(1, 12)) % 13 for n in ns]}
    iova = rng.randrange(0x100000 // PAGE, 0x0F000000 // PAGE) * PAGE
    if part == "map":
        return {"iova": iova, "size": rng.randint(2, 4) * PAGE, "seed": rng.getrandbits(31)}
    if part == "dma":
        n = rng.randint(16, 2000)
        offs = [rng.randrange(0, PAGE - n), rng.randrange(PAGE, 2 * PAGE - n), rng.randrange(2 * PAGE, 3 * PAGE - n),
                rng.randrange(PAGE, 2 * PAGE - n)]
        return {"iova": iova, "size": 3 * PAGE, "count": n, "offsets": offs, "seed": rng.getrandbits(31)}
    if part == "refuse":
        n = rng.randint(16, 1024)
        return {"iova": iova, "size": 2 * PAGE, "unmapped": iova + rng.randint(4, 64) * PAGE, "count": n,
                "offset": rng.randrange(0, 2 * PAGE - n)}
    if part == "faults":
        pages = rng.sample(range(0x1000000 // PAGE, 0x8000000 // PAGE), rng.randint(2, 3))
        return {"iovas": [p * PAGE for p in pages],
                "noise": [f"vfio-pci 0000:00:01.0: enabling device ({rng.randint(0, 0xFFFF):04x} -> 0003)",
                          "DMAR: DRHD: handling fault status reg 2"]}
    raise InputError(f"Lab 6 has no part {part!r}; parts: {', '.join(PARTS)}")


def examples(part: str) -> dict:
    """The published inputs of `part` (the notebook's check cells use these)."""
    return inputs(part, random.Random(f"lab6:{part}:{EXAMPLE_SEEDS[part]}"))


# ----------------------------------------------------------------------------- the learner's code
def _from_cell(fn) -> bool:
    """A function the learner wrote in the notebook (not one imported from a module file)."""
    name = getattr(getattr(fn, "__code__", None), "co_filename", "")
    if name.startswith("<setup"):  # the lab's own setup cell, in the grader's worker
        return False
    return name.startswith("<") or "ipykernel" in name or "ipython-input" in name


def code_of(ns: dict) -> dict:
    """The learner's driver functions (and helper functions written beside them) as data the VM
    loads: {name: {"source": text}} or, where Python kept no source, {name: {"marshal": ...}}."""
    out = {}
    names = list(DRIVER_FUNCTIONS) + sorted(n for n, v in ns.items() if inspect.isfunction(v) and _from_cell(v)
                                            and n not in DRIVER_FUNCTIONS and not n.startswith("__"))
    for name in names:
        fn = ns.get(name)
        if fn is None:
            continue
        if not inspect.isfunction(fn):
            raise InputError(f"{name} must be a function defined with def, got {type(fn).__name__}")
        try:
            out[name] = {"source": textwrap.dedent(inspect.getsource(fn))}
        except (OSError, TypeError):
            if sys.version_info[:2] != (3, 11):
                raise InputError(f"the source of {name} is not available and this Python ({sys.version.split()[0]}) "
                                 "cannot hand its compiled code to the VM's Python 3.11") from None
            out[name] = {"marshal": base64.b64encode(marshal.dumps(fn.__code__)).decode(),
                         "defaults": list(fn.__defaults__ or ())}
    return out


# ----------------------------------------------------------------------------- one boot, all parts
def parse_stream(text: str) -> dict:
    """The harness's JSON lines (qemu.boot's parse): a run cut short keeps the parts it finished."""
    from helpers.measure.kernel_vm import qemu

    text = text.replace("\r", "")
    if qemu.BEGIN not in text:
        raise SkipExperiment("the VM ended before Lab 6's checks started (no begin marker)")
    body = text.split(qemu.BEGIN, 1)[1].split(qemu.END, 1)[0]
    rows = []
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut off when the VM stopped
    return {"rows": rows, "complete": any(r.get("done") for r in rows)}


def run(parts: dict[str, dict], learner: dict, reference: dict | None = None, *,
        timeout_s: float = TIMEOUT_S) -> dict:
    """Boot the edu machine once and check `parts` ({part: inputs}) on the learner's code (the
    other parts' functions from `reference`; without one, the course's stand-ins in the guest,
    helpers/measure/kernel_vm/guest/lab6_standins.py, which work only with what the root harness lends them).

    Returns {"parts": {part: {"ok", "feedback", ...}}, "vm": how it ran}; a part the VM did not
    finish is a failure saying why. SkipExperiment when the VM cannot run here."""
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise InputError(f"Lab 6 has no part {unknown}; parts: {', '.join(PARTS)}")
    plan = {"parts": [{"part": p, "inputs": parts[p]} for p in PARTS if p in parts], "learner": learner,
            "reference": reference or {}, "stand_ins": not reference}
    blob = json.dumps(plan, sort_keys=True).encode()
    key = hashlib.sha256(blob).hexdigest()
    if key not in _CACHE:
        out = kernel_vm.run("edu", {}, main=MAIN, files={"plan.json": blob}, timeout_s=timeout_s, parse=parse_stream)
        _CACHE[key] = out
    out = _CACHE[key]
    rows = {r["part"]: r for r in out["result"]["rows"] if "part" in r}
    why = out["vm"].get("device_abort") or ("the VM stopped (a crash or the time limit) before this part finished"
                                             if not out["result"]["complete"] else "")
    result = {}
    for p in parts:
        result[p] = rows.get(p) or {"part": p, "ok": False, "feedback": f"no result: {why or 'not run'}"}
    return {"parts": result, "vm": out["vm"]}


def try_parts(ns: dict, *parts: str) -> dict:
    """The notebook's checks on the published examples: each part with the learner's functions for
    that part and the course's stand-ins for the parts its check builds on (a learner stuck on
    open_device still gets feedback on the others); every part in one boot (kept while the code
    is unchanged), the results of `parts` returned."""
    res = run({p: examples(p) for p in PARTS}, code_of(ns))["parts"]
    return {p: res[p] for p in (parts or PARTS)}


def judge(c, results: dict, part: str) -> None:
    """A check cell's verdict on `part` from a run's results (c: helpers.labs.grading.check)."""
    r = results.get(part) or {"ok": False, "feedback": f"no result for part {part}"}
    c.require(bool(r.get("ok")), str(r.get("feedback") or "failed"))
