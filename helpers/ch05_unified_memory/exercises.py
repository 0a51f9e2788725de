"""Chapter 5's exercises: each computes what it expects from the chapter's Evidence, never on the page.

5.1 fault_overhead — derivation (checks.close with hints): what page faults added to a first read.
5.2 safe_share     — derivation (checks.close with hints): the largest managed allocation the course allows.
5.3 which_si_code  — conceptual (checks.choice): SEGV_ACCERR or SEGV_MAPERR, from the recorded mapping.
5.4 example2_fixed — coding (checks.code): source question 003's Example 2 done right in Numba, with
                     memory both processors can reach and no explicit copy (runs on the simulator
                     without a GPU).
5.5 prefetch_why   — conceptual (checks.choice): why a prefetch beats fault-driven migration.
"""

from __future__ import annotations

import warnings

import numpy as np

from helpers.ch05_unified_memory import managed
from helpers.core.evidence import Evidence
from helpers.learning import checks
from helpers.learning.checks import factor_hint
from helpers.measure import sandbox


def fault_overhead_ms(data: dict) -> float:
    """First read minus second read, in ms, of the largest fault-mode run of um.migration."""
    big = max((r for r in managed.check_runs(data) if r["mode"] == "fault"), key=lambda r: r["nbytes"])
    return (big["kernel_first_s"] - big["kernel_second_s"]) * 1e3


def fault_overhead(answer, mig: Evidence) -> bool | None:
    """Exercise 5.1."""
    want = fault_overhead_ms(mig.require())
    return checks.close("5.1 fault overhead", answer, want, rel_tol=0.02,
                        hints=[factor_hint(1e-3, "That looks like seconds: the answer is in milliseconds."),
                               factor_hint(1e3, "That looks like microseconds: the answer is in milliseconds.")],
                        hint="Take the fault row of the largest size: GPU 1st read ms minus GPU 2nd read ms.",
                        why="the second read finds every page resident, so the difference is what servicing the "
                            "faults and migrating the pages cost.")


def safe_share(answer, mig: Evidence) -> bool | None:
    """Exercise 5.2: the largest managed allocation allowed, in GiB, from the free memory shown."""
    free = mig.require()["free_device_bytes_at_start"]
    want = managed.largest_safe(free) / 2**30
    return checks.close("5.2 largest safe managed allocation", answer, want, rel_tol=0.01,
                        hints=[factor_hint(1 / managed.SAFE_MANAGED_SHARE,
                                           f"You gave all the free memory: the helpers allow only "
                                           f"{managed.SAFE_MANAGED_SHARE:.0%} of it."),
                               factor_hint(2**30 / 1e9, "GiB are 2**30 bytes, not 10**9.")],
                        hint="free bytes × the allowed share, divided by 2**30.",
                        why="the helpers refuse more than this share of the free device memory, so a managed "
                            "range never needs eviction while a kernel sweeps it.")


SI_OPTIONS = {
    "a": "SEGV_MAPERR: the address is in no mapping at all",
    "b": "SEGV_ACCERR: the address is in a mapping whose permissions forbid the store",
    "c": "SIGBUS: the mapping exists but no page can back it",
    "d": "no signal: the store lands in GPU memory over PCIe",
}


def which_si_code(answer, wrong: Evidence) -> bool | None:
    """Exercise 5.3: which si_code went with the child's SIGSEGV, decided from the recorded mapping."""
    o = sandbox.Outcome.from_dict(wrong.require()["host_write_device_ptr"])
    m = o.results.get("cpu_mapping")
    if o.status != "signal":
        correct = "d"
    elif m and "w" not in m["perms"]:
        correct = "b"
    else:
        correct = "a"
    perms = m["perms"] if m else "no mapping"
    expl = {
        "a": f"the recorded maps line for the address says {perms}: " + (
            "there is a mapping there, reserved by the driver, so the address is not unmapped." if m else
            "indeed no mapping."),
        "b": f"the recorded maps line says {perms}: " + (
            "a reservation with no access rights, so the kernel finds the mapping, sees that it forbids writes, "
            "and sends SIGSEGV with SEGV_ACCERR." if correct == "b" else "that mapping allows the store."),
        "c": "SIGBUS is for a mapping whose backing cannot be read (a truncated file, a hardware error), "
             "not for a permission the mapping never had.",
        "d": "a CPU store goes through the CPU's page tables; a GPU virtual address has no usable entry "
             "there on this system, and the child died of a signal.",
    }
    return checks.choice("5.3 which si_code", answer, SI_OPTIONS, correct, expl)


#: numba.cuda calls that make device-only memory, which the CPU can reach only by an explicit copy
EXPLICIT = ("to_device", "device_array", "device_array_like")
#: numba.cuda calls that make memory both processors can dereference
SHARED = ("managed_array", "mapped_array")


class _Recording:
    """numba.cuda as the learner's function sees it during the trial: every call passes through,
    and the allocations (and the arrays they gave) are recorded."""

    def __init__(self, cuda):
        self._cuda, self.calls, self.shared = cuda, [], []

    def __getattr__(self, name: str):
        real = getattr(self._cuda, name)
        if name not in EXPLICIT + SHARED:
            return real

        def recorded(*args, **kwargs):
            self.calls.append(name)
            out = real(*args, **kwargs)
            if name in SHARED:
                self.shared.append(out)
            return out
        return recorded


def _address(a) -> int | None:
    try:
        return int(np.asarray(a).__array_interface__["data"][0])
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def _run_recorded(fn, n: int):
    """fn(n) with `cuda` in its globals recording (the notebook's own name untouched): (result, recording)."""
    import types

    from helpers.core.gpu import cuda

    rec = _Recording(cuda)
    twin = types.FunctionType(fn.__code__, dict(fn.__globals__, cuda=rec), fn.__name__, fn.__defaults__,
                              fn.__closure__)
    with warnings.catch_warnings(), np.errstate(over="ignore"):  # 255 + 1 wraps in uint8: that is intended
        warnings.simplefilter("ignore", RuntimeWarning)
        return twin(n), rec


def example2_trial(fn, *, n: int = 1000) -> list[str]:
    """Run the learner's `example2_done_right(n)` and judge what it did: the array it returns must
    hold (i % 256) + 1, be memory it allocated with managed_array or mapped_array (so the CPU's
    fill and the GPU's kernel touched the same bytes), and no device-only array (to_device,
    device_array) may have been made, so no explicit copy was possible. The expected array is made
    only after the learner's function returned, so no frame it can reach holds it."""
    got, rec = _run_recorded(fn, n)
    explicit = sorted({c for c in rec.calls if c in EXPLICIT})
    if explicit and not rec.shared:
        raise checks.NotAnswered(f"example2_done_right still makes device-only memory ({', '.join(explicit)}) "
                                 "and copies, as the starter does")
    problems = []
    if explicit:
        problems.append(f"your function called cuda.{explicit[0]}: that makes device-only memory, reached by an "
                        "explicit copy. The point is that the GPU reads what the CPU wrote in place.")
    shared_at = {_address(a) for a in rec.shared} - {None}
    if not rec.shared:
        problems.append("allocate with cuda.managed_array or cuda.mapped_array: memory both the CPU and the GPU "
                        "can dereference (on the simulator, mapped_array).")
    elif _address(got) not in shared_at:
        problems.append("return the managed (or mapped) array itself, the memory the kernel incremented in place, "
                        "not a copy of it.")
    got = np.asarray(got)
    want = ((np.arange(n) + 1) % 256).astype(np.uint8)
    if got.shape != (n,):
        problems.append(f"return an array of {n} elements, got shape {got.shape}.")
    elif not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
        bad = int(np.argmax(got.astype(np.int64) != want.astype(np.int64)))
        problems.append(f"element {bad} is {int(got[bad])}, expected {int(want[bad])} ((i % 256) + 1, wrapping "
                        "at 256: use dtype uint8).")
    return problems


def example2_fixed(fn) -> bool | None:
    """Exercise 5.4: source question 003's Example 2 done right."""
    return checks.code("5.4 Example 2 done right", fn, example2_trial,
                       why="managed (or mapped pinned) memory is mapped in both the CPU's and the GPU's page tables, "
                           "so the CPU's stores and the GPU's loads reach the same bytes with no copy call.")


PF_OPTIONS = {
    "a": "a prefetch moves the whole range in large copy-engine transfers, with no fault round trips",
    "b": "a prefetch compresses the data",
    "c": "page faults make the kernel re-read each byte many times",
    "d": "after a prefetch the kernel reads host memory over PCIe, which is faster",
}
PF_EXPL = {
    "a": "each batch of faults costs a trip through the fault buffer, an interrupt, the driver's servicing and a "
         "replay while the warps wait; a prefetch pays the setup once and streams the range at the link's DMA rate.",
    "b": "nothing is compressed: the same bytes cross the same link.",
    "c": "a faulting access waits and is replayed once its page arrives; the bytes are read once.",
    "d": "after a prefetch the pages are in GPU memory; the kernel reads them there.",
}


def prefetch_why(answer) -> bool | None:
    """Exercise 5.5."""
    return checks.choice("5.5 why a prefetch wins", answer, PF_OPTIONS, "a", PF_EXPL)
