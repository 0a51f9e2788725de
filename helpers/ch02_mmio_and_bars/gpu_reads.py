"""Chapter 2 — why an uncached read is slow, measured from the GPU's side of the link.

The CPU's reads of the real GPU's BAR0 are refused on the reference machine (the sysfs
`resource0` mmap fails; `probe_bar0_mmap` records how), so the course times the same kind of
transaction in the other direction: one GPU thread reading mapped pinned host memory, each read
waiting for its completion before the next may start (helpers.measure.gpu_chase), against the
same chase over device memory, and against one thread *storing* to host memory, where nothing
comes back (a posted write). These are live measurements on a GPU, replayed elsewhere; the
toy GPU's `mmio_read_rtt_ns` is a model parameter, not one of them.
"""

from __future__ import annotations

import errno
import mmap
import os
import statistics

import numpy as np
import plotly.graph_objects as go

from helpers.core import gpu
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cuda
from helpers.measure import gpu_chase, nvbw_chase
from helpers.measure.gpu_chase import TRIALS, chase_ns_per_read, chase_trials, sm_means, trial_means
from helpers.presentation import figures

store = gpu.KernelOnFirstUse("helpers.ch02_mmio_and_bars._store_kernel", "store")  # compiled once per process
TLB_CHECK_FACTOR = 4  # the device chase is repeated over a buffer this many times larger


def sizes(quick: bool) -> tuple[int, int, int]:
    """(host chain bytes, device chain bytes, reads per timed run per SM) for the recorder's full or
    quick run. The device chain is at least 4 x this GPU's L2 (gpu_chase.device_chain_bytes), in
    both: a shorter one would be read twice by the SMs' runs, and the L2 would answer."""
    steps = gpu_chase.QUICK_STEPS if quick else gpu_chase.STEPS
    return gpu_chase.HOST_CHAIN_BYTES, gpu_chase.device_chain_bytes(gpu_chase.l2_bytes()), steps


def store_ns_per_write(target, steps: int) -> float:
    """Nanoseconds per store: one GPU thread writes `steps` values into `target`, each to its own
    256-byte slot. A store is posted: the thread sends it and goes on, waiting for no reply."""
    times_ns = []
    for n in (1, steps, 2 * steps):
        begin, end = cuda.event(), cuda.event()
        begin.record()
        store[1, 1](target, n)
        end.record()
        end.synchronize()
        times_ns.append(begin.elapsed_time(end) * 1e6)  # ms -> ns
    return (times_ns[2] - times_ns[1]) / steps


def probe_bar0_mmap(pci_address: str | None) -> dict:
    """Try to map (never read) the first page of the GPU's BAR0 through sysfs; say what happened.

    The outcome is evidence for the page: on the reference machine the mmap is refused. Nothing
    is ever loaded from the mapping: a stray read of a live GPU's registers can hang it."""
    if not pci_address:
        return {"path": None, "outcome": "no PCI address for the GPU"}
    path = f"/sys/bus/pci/devices/{pci_address}/resource0"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return {"path": path, "outcome": "open refused", "errno": errno.errorcode.get(exc.errno, str(exc.errno))}
    try:
        m = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ)
    except OSError as exc:
        return {"path": path, "outcome": "mmap refused", "errno": errno.errorcode.get(exc.errno, str(exc.errno))}
    finally:
        os.close(fd)
    m.close()  # mapped, never read
    return {"path": path, "outcome": "mmap allowed (nothing was read through it)", "errno": None}


@experiment("mmio.gpu_read_latency", chapter=2, needs=(GPU,),
            title="One GPU thread chasing pointers from every SM: ns per read over mapped pinned host memory vs device memory")
def record_read_latency(quick: bool, code=chase_ns_per_read) -> dict:
    """Host and device chases from every SM (gpu_chase's design: no slot read twice in a trial, no
    stride, the L2 flushed before each trial); then, in the full run, the device chase over a buffer
    TLB_CHECK_FACTOR times larger: if more pages cost more per read, the two device figures differ
    and the page says so. Each trial's figure is the mean over the SMs; `*_sm_ns` keeps each SM's.
    `nvbw` is nvbandwidth's own statistic (helpers.measure.nvbw_chase), the figure compared with its
    host_device_latency_sm; the quick run takes one round of a thousand reads (a check of the code)."""
    host_n, dev_n, steps = sizes(quick)
    host = chase_trials(code, host_n, steps, "host")
    device = chase_trials(code, dev_n, steps, "device")
    out = {"nbytes": host_n, "device_nbytes": dev_n, "l2_bytes": gpu_chase.l2_bytes(),
           "flush_bytes": gpu_chase.FLUSH_MULTIPLE * gpu_chase.l2_bytes(), "steps": steps, "trials": TRIALS,
           "slot_bytes": gpu_chase.SLOT_BYTES, "sms": len(host[0]), "statistic": STATISTIC,
           **_row("host", host), **_row("device", device), "device_tlb_check": None,
           "bar0_mmap": probe_bar0_mmap(gpu.probe().pci_bus_id),
           "nvbw": nvbw_chase.rounds(1, 1000) if quick else nvbw_chase.rounds()}
    if not quick:
        big = trial_means(chase_trials(code, dev_n * TLB_CHECK_FACTOR, steps, "device"))
        out["device_tlb_check"] = {"nbytes": dev_n * TLB_CHECK_FACTOR, "device_ns": big, "median_ns": statistics.median(big)}
    return out


STATISTIC = ("the course's chase: each trial the mean over every SM of one thread's ns per read (random slots over "
             "128 MiB, launch cancelled); the figure: the median trial. nvbandwidth's statistic is in `nvbw`")


def _row(where: str, per_trial: list[list[float]]) -> dict:
    """A chase's fields in the recording: each trial's mean over the SMs, their median, each SM's mean."""
    means = trial_means(per_trial)
    return {f"{where}_ns": means, f"{where}_median_ns": statistics.median(means), f"{where}_sm_ns": sm_means(per_trial)}


@experiment("mmio.gpu_posted_writes", chapter=2, needs=(GPU,),
            title="One GPU thread storing to mapped pinned host memory: ns per store (posted writes)")
def record_posted_writes(quick: bool, code=store_ns_per_write) -> dict:
    nbytes, steps = ((8 << 20), 4096) if quick else ((64 << 20), 65536)
    target = cuda.mapped_array(nbytes // 8, dtype=np.int64)
    with gpu.deliberate_launch():  # one thread on purpose: the stores must go one at a time
        ns = [float(code(target, steps)) for _ in range(TRIALS)]
    del target
    return {"nbytes": nbytes, "steps": steps, "trials": TRIALS, "host_store_ns": ns,
            "host_store_median_ns": statistics.median(ns)}


def latency_figure(reads: Evidence, writes: Evidence) -> figures.CourseFigure:
    """ns per access for reads of host memory, reads of device memory and stores to host memory
    (median bar, each trial a marker), on a log axis."""
    r, w = reads.require(), writes.require()
    series = (("GPU reads host memory (non-posted: waits for the completion)", r["host_ns"]),
              ("GPU reads its own memory (HBM)", r["device_ns"]),
              ("GPU stores to host memory (posted: waits for nothing)", w["host_store_ns"]))
    fig = go.Figure()
    fig.add_bar(x=[s[0] for s in series], y=[statistics.median(s[1]) for s in series], name="median of trials")
    for name, vals in series:
        fig.add_scatter(x=[name] * len(vals), y=vals, mode="markers", name=f"trials: {name[:22]}…", showlegend=False)
    fig.update_layout(title="One GPU thread, one access at a time: nanoseconds per access",
                      yaxis={"type": "log", "title": "ns per access (log scale)"}, showlegend=False)
    parts = list(dict.fromkeys(reads.parts + writes.parts))
    return figures.CourseFigure(fig, parts)


def latency_rows(reads: dict, writes: dict | None = None) -> list[tuple[str, str, str]]:
    """(access, median ns, trials in ns) rows for a table; a recording made before the chase ran
    from every SM has no `sms` and its rows say nothing about SMs."""
    every = f", mean of {reads['sms']} SMs" if reads.get("sms") else ""
    rows = [(f"read, mapped pinned host memory ({_mib(reads['nbytes'])}{every})", f"{reads['host_median_ns']:,.0f}",
             _trials(reads["host_ns"])),
            (f"read, device memory ({_mib(reads.get('device_nbytes', reads['nbytes']))}{every})",
             f"{reads['device_median_ns']:,.0f}", _trials(reads["device_ns"]))]
    tlb = reads.get("device_tlb_check")
    if tlb:
        rows.append((f"read, device memory ({_mib(tlb['nbytes'])}: more pages)", f"{tlb['median_ns']:,.0f}",
                     _trials(tlb["device_ns"])))
    if writes:
        rows.append(("store, mapped pinned host memory", f"{writes['host_store_median_ns']:,.1f}",
                     ", ".join(f"{v:,.1f}" for v in writes["host_store_ns"])))
    return rows


def _trials(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


def sm_spread_line(reads: dict) -> str:
    """How much the SM a read starts from matters: the middle half and the middle 80% of the SMs'
    figures (each SM's mean over the trials); empty for a recording made before the chase ran from
    every SM. The extremes are left out on purpose: one SM's figure rests on a few hundred reads
    per trial, so a single slow or fast run moves it, while the mean over the SMs barely moves."""
    if not reads.get("host_sm_ns"):
        return ""
    parts = []
    for where in ("host", "device"):
        q10, q25, q75, q90 = np.percentile(reads[f"{where}_sm_ns"], [10, 25, 75, 90])
        parts.append(f"{where} memory: middle half {q25:,.0f}-{q75:,.0f} ns, middle 80% {q10:,.0f}-{q90:,.0f} ns")
    return (f"from single SMs ({len(reads['host_sm_ns'])} of them, each the mean of its trials): "
            + "; ".join(parts) + ". The figures above are the means over the SMs.")


def _mib(n: int) -> str:
    return f"{n >> 20:,} MiB"


def device_latency_note(reads: dict) -> str:
    """What the device-memory figure is, from the recording's own sizes: the buffer against the
    L2, the flush, and whether a buffer with more pages read slower (the TLB check)."""
    n, l2 = reads.get("device_nbytes", reads["nbytes"]), reads.get("l2_bytes")
    if not l2:  # a recording made before the chase defeated the L2
        return (f"the device chase covered {_mib(n)}; these data do not say how that compares with the "
                "L2, so some reads may have been L2 hits.")
    text = (f"the device chase covered {_mib(n)}, {n / l2:.1f}x the {_mib(l2)} L2, visiting each 256-byte slot "
            f"at most once after {_mib(reads['flush_bytes'])} of other writes had flushed the L2: every read "
            "missed the L2 and went to HBM.")
    tlb = reads.get("device_tlb_check")
    if tlb:
        d, big = reads["device_median_ns"], tlb["median_ns"]
        spread = (max(reads["device_ns"]) - min(reads["device_ns"])) / d if d > 0 else float("nan")
        diff = (big - d) / d if d > 0 else float("nan")
        same = abs(diff) <= max(2 * spread, 0.02)
        text += (f" Over {_mib(tlb['nbytes'])} ({TLB_CHECK_FACTOR}x the pages) a read took {big:,.0f} ns "
                 f"({diff:+.1%}; trials within {spread:.1%}): "
                 + ("the number of pages touched did not change the figure, so address translation adds the "
                    "same to every read at both sizes." if same else
                    "more pages cost more, so part of each read is address translation (TLB misses), and the "
                    "figure depends on the buffer size."))
    return text


def read_verdict(reads: dict, writes: dict | None = None, rtt_model_ns: float | None = None) -> str:
    """What the numbers (live or recorded) say about reads across the link, decided from them."""
    h, d = reads["host_median_ns"], reads["device_median_ns"]
    spread = (max(reads["host_ns"]) - min(reads["host_ns"])) / h if h > 0 else float("nan")
    lines = [f"a read of host memory took {h:,.0f} ns (trials within {spread:.1%}), a read of device memory "
             f"{d:,.0f} ns: crossing the link costs {h / d:.1f}x a trip to the GPU's own memory."]
    if writes:
        s = writes["host_store_median_ns"]
        lines.append(f"a store to host memory occupied the thread for {s:,.1f} ns: {h / s:,.0f}x less than a read, "
                     "because nothing comes back for a posted write.")
    lines.append(f"8-byte reads one at a time would move {8 / h * 1e3:,.1f} MB/s.")
    if rtt_model_ns:
        lines.append(f"(the toy GPU's model uses {rtt_model_ns:,.0f} ns for a CPU's MMIO read: a SIMULATED "
                     "parameter of the same order, not this measurement)")
    return "\n".join(lines)


# The likely reason behind each errno a sysfs resourceN mmap can return. In mainline Linux
# (drivers/pci/pci-sysfs.c, pci_mmap_resource) the first check is
# security_locked_down(LOCKDOWN_PCI_ACCESS), which answers EPERM to everyone, root included,
# while the kernel is locked down (security/lockdown/lockdown.c, lockdown_is_locked_down);
# EINVAL comes from a region a driver claimed exclusively (iomem_is_exclusive) or a range
# that does not fit the BAR (pci_mmap_fits); EACCES from the file's 0600 mode (not root).
# The recording does not hold the lockdown state, so a cause is "likely", never "shown".
MMAP_ERRNO_CAUSES = {
    "EPERM": "likely kernel lockdown: pci_mmap_resource (drivers/pci/pci-sysfs.c) first asks "
             "security_locked_down(LOCKDOWN_PCI_ACCESS), which refuses even root while the kernel is locked down "
             "(Secure Boot often turns lockdown on); these data do not say whether it was (/sys/kernel/security/"
             "lockdown would), so this is the "
             "likely cause, not a proven one",
    "EINVAL": "the region is claimed exclusively by a driver (iomem_is_exclusive) or the range does not fit the BAR",
    "EACCES": "the resourceN files are readable by root only (mode 0600)",
}


def bar0_line(reads: dict) -> str:
    """What happened when the recorder tried to map BAR0 through sysfs, and its likely cause."""
    b = reads.get("bar0_mmap") or {}
    if not b.get("path"):
        return "BAR0 mapping: not attempted (no PCI address)."
    err = f" ({b['errno']})" if b.get("errno") else ""
    cause = MMAP_ERRNO_CAUSES.get(b.get("errno") or "")
    return f"mapping {b['path']} for reading: {b['outcome']}{err}." + (f"\n  why: {cause}." if cause else "")


def latency_beside(here: Evidence, ref: Evidence) -> list[str]:
    """The read latencies of host and device memory, measured now beside the reference's (replay: the
    recorded values with their machine); a difference beyond the trials' spread is named."""
    from helpers.presentation import beside

    def vals(ev: Evidence) -> dict[str, beside.Value]:
        d = ev.require()
        return {w: beside.Value(d[f"{w}_median_ns"], (max(d[f"{w}_ns"]) - min(d[f"{w}_ns"])) / 2)
                for w in ("host", "device")}
    mine, theirs = vals(here), vals(ref)
    return [beside.sentence("a dependent read of host memory (across the link)", "ns", here, mine["host"], ref,
                            theirs["host"], "link"),
            beside.sentence("a dependent read of device memory", "ns", here, mine["device"], ref, theirs["device"],
                            "device")]


def nvbw_lines(reads: dict) -> list[str]:
    """nvbandwidth's statistic beside the course's chase, from the recording's own numbers: what each
    measures, each's rounds and spread, and how far apart the two are. A recording made before the
    course measured nvbandwidth's statistic says so, and how to record it."""
    nv = reads.get("nvbw")
    if not nv:
        return ["nvbandwidth's statistic: not in this recording (made before the course measured it); "
                "`python -m helpers.record --only mmio.gpu_read_latency --out <machine folder>` records it."]
    h, c = nv["host_median_ns"], reads["host_median_ns"]
    q10, q90 = np.percentile(nv["host_sm_ns"], [10, 90])
    return [f"nvbandwidth's statistic (host_device_latency_sm), as the course measures it: {h:,.0f} ns per read; "
            f"{nv['rounds']} round(s), each a fresh {_mib(nv['nbytes'])} buffer walked in {nv['stride_bytes']}-byte steps "
            f"from its start, {nv['reads_per_sm']:,} reads from each of {len(nv['host_sm_ns'])} SM(s), the launches "
            f"included: {_trials(nv['host_ns'])} ns (spread {nvbw_chase.spread(nv['host_ns']):.1%}). "
            f"Single SMs: middle 80% {q10:,.0f}-{q90:,.0f} ns.",
            f"the course's chase (random slots over {_mib(reads['nbytes'])}, no line read twice, launch cost "
            f"cancelled): {c:,.0f} ns, {(c - h) / h:+.1%} against nvbandwidth's statistic measured in the same run. "
            + _launch_share(nv, c - h, reads["nbytes"])
            + "Only nvbandwidth's statistic is compared with nvbandwidth (tools/bwcheck/nvbw_compare.py)."]


def _launch_share(nv: dict, diff_ns: float, own_nbytes: int) -> str:
    """What the timed launches add per read (GPU side: each is queued behind a gate, see
    helpers.measure.nvbw_chase), from the recording's empty launch: the part of the two statistics'
    difference that timing explains; the rest is the chain (where the reads go)."""
    us = nv.get("empty_launch_us")
    if us is None:
        return ""
    per_read = us * 1e3 * len(nv["host_sm_ns"]) / nv["accesses"]
    return (f"An empty launch took {us:,.1f} us on the GPU, so the launches nvbandwidth's statistic times add "
            f"{per_read:,.2f} ns per read; "
            f"the other {diff_ns + per_read:+,.0f} ns are the chains' (random slots on ever new pages of "
            f"{_mib(own_nbytes)} against consecutive lines of {_mib(nv['nbytes'])}) and the rounds' noise. ")
