"""Chapter 6, part 2: fences in a real kernel — dma_fence, dma_resv, dma-buf poll, sync_file.

Experiment ``real_fences.implicit_sync`` boots the kernel lab's ``fences`` machine (Debian's
stock kernel, the ``vgem`` driver, no device) and runs helpers/measure/kernel_vm/guest/fences.c. vgem has two
test ioctls: ``DRM_IOCTL_VGEM_FENCE_ATTACH`` puts a new, unsignalled ``dma_fence`` into a
buffer's reservation object (``dma_resv``) as a writer's fence (``DMA_RESV_USAGE_WRITE``) or a
reader's (``DMA_RESV_USAGE_READ``), and ``DRM_IOCTL_VGEM_FENCE_SIGNAL`` signals it. That is
what a GPU driver does on every command submission, with a fence its hardware signals; here
the program plays the GPU. What the kernel then answered:

* ``poll()`` on the buffer's dma-buf: POLLIN (may I read?) waits for the writers' fences,
  POLLOUT (may I write?) waits for all of them (``dma_buf_poll``, ``dma_resv_usage_rw``);
* ``DMA_BUF_IOCTL_EXPORT_SYNC_FILE`` turns the fences a reader or a writer must wait for into
  a ``sync_file`` (one fence, or the signalled "stub" fence when there is nothing to wait
  for), whose ``SYNC_IOC_FILE_INFO`` names the fence's driver and timeline;
* how long ``poll(dma-buf)``, ``poll(sync_file)`` and ``DMA_BUF_IOCTL_SYNC`` (the start of
  CPU access) waited when another process signalled after ``delay_ms``;
* ``DMA_BUF_IOCTL_IMPORT_SYNC_FILE``: another buffer's pending fence made a writer of this one;
* ``DRM_IOCTL_SYNCOBJ_CREATE`` on vgem (no ``DRIVER_SYNCOBJ``: refused);
* a fence nobody signals: vgem's own timer (``VGEM_FENCE_TIMEOUT``, 10 s) signals it.

Times are the guest's ``CLOCK_MONOTONIC`` inside a virtual machine (TCG or KVM): emulated
timings, never hardware ones. Live where QEMU is installed; elsewhere the transcript the
recorder made (data/kernel_lab/real_fences.implicit_sync.json).

Kernel sources (checked against torvalds/linux): vgem_fence_attach_ioctl,
vgem_fence_signal_ioctl, VGEM_FENCE_TIMEOUT (drivers/gpu/drm/vgem/vgem_fence.c);
dma_buf_poll, dma_buf_poll_add_cb, __dma_buf_begin_cpu_access, dma_buf_export_sync_file,
dma_buf_import_sync_file (drivers/dma-buf/dma-buf.c); dma_resv_usage_rw
(include/linux/dma-resv.h); dma_fence_get_stub (drivers/dma-buf/dma-fence.c); sync_file_poll
(drivers/dma-buf/sync_file.c); drm_syncobj_create_ioctl (drivers/gpu/drm/drm_syncobj.c);
ttm_bo_wait_ctx, ttm_bo_evict (drivers/gpu/drm/ttm/ttm_bo.c).
"""

from __future__ import annotations

import errno

from helpers.core import transcript, validate
from helpers.core.errors import SkipExperiment
from helpers.core.evidence import Evidence
from helpers.core.experiments import KERNEL_LAB_REFERENCE, QEMU, experiment
from helpers.measure import kernel_vm
from helpers.presentation import figures

EXPERIMENT = "real_fences.implicit_sync"
DEFAULT_DELAY_MS = 200
POLL_MS = 100  # how long each "does it block?" poll waits before giving up
VGEM_FENCE_TIMEOUT_S = 10  # drivers/gpu/drm/vgem/vgem_fence.c: VGEM_FENCE_TIMEOUT (10*HZ)
SECTIONS = ("idle", "write_fence", "after_signal", "wakeups", "read_fence", "import", "syncobj")


@experiment(EXPERIMENT, chapter=6, needs=(QEMU,), reference=KERNEL_LAB_REFERENCE,
            title="Fences in a real kernel: poll, sync_file and CPU access on a vgem buffer with an unsignalled "
                  "dma_fence (QEMU)",
            params={"delay_ms": validate.count(20, 2000), "never_signalled": validate.boolean()})
def implicit_sync(quick: bool, delay_ms: int = DEFAULT_DELAY_MS, never_signalled: bool = True) -> dict:
    """Boot the fences machine once. `delay_ms`: when the helper process signals in the wake-up
    steps; `never_signalled`: also wait out a fence nobody signals (about 10 s more)."""
    run = kernel_vm.run("fences", {"run": "fences", "delay_ms": str(delay_ms), "poll_ms": str(POLL_MS),
                                   "never": "1" if never_signalled else "0"})
    data = {**run["result"], "vm": run["vm"]}
    facts(data)  # a probe that failed half-way is no result: SkipExperiment says what is missing
    return data


# --------------------------------------------------------------------------------------------
# What the kernel answered, as plain values
# --------------------------------------------------------------------------------------------
def errno_name(rc: int) -> str:
    """-16 -> 'EBUSY'; 0 -> 'ok'; -95 -> 'EOPNOTSUPP' (the kernel's name; Python says ENOTSUP)."""
    if rc == 0:
        return "ok"
    if rc == -errno.EOPNOTSUPP:
        return "EOPNOTSUPP"
    return errno.errorcode.get(-rc, f"errno {-rc}") if rc < 0 else f"rc {rc}"


def _get(data: dict, *path):
    node = data
    for key in path:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            raise SkipExperiment(f"the fences probe's result has no {'/'.join(map(str, path))} "
                                 f"(error: {data.get('error', 'none reported')})") from None
    return node


def _blocked(p: dict) -> bool:
    """A poll that returned 0 (timed out) without the event."""
    return p["rc"] == 0 and not p["ready"]


def _sync_file(export: dict) -> dict:
    info = export["info"]
    fence = (info.get("fences") or [{}])[0]
    return {"status": info["status"], "driver": fence.get("driver_name"), "timeline": fence.get("obj_name"),
            "signalled": info["status"] == 1}


def facts(data: dict) -> dict:
    """What the run showed, as plain values (the page, the exercises and the tests read these).

    SkipExperiment names the first missing piece when the probe did not complete."""
    if "error" in data:
        raise SkipExperiment(f"the fences probe failed in the VM: {data['error']}")
    for s in SECTIONS:
        _get(data, s)
    wakeups = [{"call": w["call"], "waited_ms": _get(w, "waited_us") / 1000, "signal_after_ms": w["signal_after_ms"],
                "woke": w["rc"] == 0 if "DMA_BUF_IOCTL_SYNC" in w["call"] else bool(w.get("ready"))}
               for w in _get(data, "wakeups")]
    out = {
        "kernel_release": data.get("kernel_release"), "cap_syncobj": data["cap_syncobj"],
        "idle_read_ready": _get(data, "idle", "poll_in", "ready"), "idle_write_ready": _get(data, "idle", "poll_out", "ready"),
        "idle_sync_file": _sync_file(_get(data, "idle", "export_read")),
        "write_fence_blocks_readers": _blocked(_get(data, "write_fence", "poll_in")),
        "write_fence_blocks_writers": _blocked(_get(data, "write_fence", "poll_out")),
        "poll_timeout_ms": _get(data, "write_fence", "poll_in", "timeout_ms"),
        "poll_waited_ms": _get(data, "write_fence", "poll_in", "waited_us") / 1000,
        "bufinfo_fence_lines": [x.strip() for x in _get(data, "write_fence", "bufinfo") if "fence" in x],
        "write_sync_file": _sync_file(_get(data, "write_fence", "export_read")),
        "write_sync_file_blocks": _blocked(_get(data, "write_fence", "export_read", "poll")),
        "second_fence_beside_writer": errno_name(_get(data, "write_fence", "attach_read_rc")),
        "after_read_ready": _get(data, "after_signal", "poll_in", "ready"), "after_write_ready": _get(data, "after_signal", "poll_out", "ready"),
        "signal_again": errno_name(_get(data, "after_signal", "signal_again_rc")),
        "wakeups": wakeups,
        "read_fence_blocks_readers": _blocked(_get(data, "read_fence", "poll_in")),
        "read_fence_blocks_writers": _blocked(_get(data, "read_fence", "poll_out")),
        "read_fence_reader_sync_file": _sync_file(_get(data, "read_fence", "export_read")),
        "read_fence_writer_sync_file": _sync_file(_get(data, "read_fence", "export_write")),
        "writer_beside_reader": errno_name(_get(data, "read_fence", "attach_write_rc")),
        "import_rc": errno_name(_get(data, "import", "import_rc")),
        "import_blocks_readers": _blocked(_get(data, "import", "poll_in_before")),
        "import_ready_after_signal": _get(data, "import", "poll_in_after", "ready"),
        "syncobj_create": errno_name(_get(data, "syncobj", "create_rc")),
    }
    if "never_signalled" in data:
        out["never"] = {"waited_s": _get(data, "never_signalled", "poll_in", "waited_us") / 1e6,
                        "ready": _get(data, "never_signalled", "poll_in", "ready"), "poll_limit_s": _get(data, "never_signalled", "poll_in", "timeout_ms") / 1000,
                        "late_signal": errno_name(_get(data, "never_signalled", "signal_rc"))}
    return out


# --------------------------------------------------------------------------------------------
# The learner's rule against the kernel's answers (the chapter's coding exercise)
# --------------------------------------------------------------------------------------------
def observed_cases(data: dict) -> list[tuple[list[tuple[str, bool]], str, bool]]:
    """Every poll() of the run as (fences on the buffer as (usage, signalled), access, waited?):
    the kernel's own answers, for checking a rule of who waits for whom."""
    f = facts(data)
    pending_w, pending_r, done_w = ("write", False), ("read", False), ("write", True)
    cases = [([], "read", not f["idle_read_ready"]), ([], "write", not f["idle_write_ready"]),
             ([pending_w], "read", f["write_fence_blocks_readers"]), ([pending_w], "write", f["write_fence_blocks_writers"]),
             ([done_w], "read", not f["after_read_ready"]), ([done_w], "write", not f["after_write_ready"]),
             ([done_w, pending_r], "read", f["read_fence_blocks_readers"]),
             ([done_w, pending_r], "write", f["read_fence_blocks_writers"]),
             ([done_w, ("write", False)], "read", f["import_blocks_readers"])]
    return cases


def kernel_rule(fences: list[tuple[str, bool]], access: str) -> bool:
    """The kernel's rule (dma_resv_usage_rw): a reader waits for unsignalled writers, a writer
    for every unsignalled fence. Used by the tests to prove real_exercises.check_rule can pass."""
    return any(not signalled and (access == "write" or usage == "write") for usage, signalled in fences)


# --------------------------------------------------------------------------------------------
# Views
# --------------------------------------------------------------------------------------------
def _yn(b: bool, yes: str, no: str) -> str:
    return yes if b else no


def table(ev: Evidence) -> figures.Table:
    """One row per question put to the kernel, with its answer."""
    f = facts(ev.require())
    t = f["poll_timeout_ms"]
    wsf, rsf = f["write_sync_file"], f["read_fence_writer_sync_file"]

    def poll_answer(blocked: bool) -> str:
        return _yn(blocked, f"timed out after {t} ms", "ready at once")

    rows = [
        ("no fences: poll POLLIN / POLLOUT", f"{_yn(f['idle_read_ready'], 'ready', 'blocked')} / "
                                             f"{_yn(f['idle_write_ready'], 'ready', 'blocked')}"),
        ("no fences: EXPORT_SYNC_FILE gives", f"{f['idle_sync_file']['driver']} fence, "
                                              f"{_yn(f['idle_sync_file']['signalled'], 'signalled', 'pending')}"),
        ("writer's fence attached: poll POLLIN (a reader)", poll_answer(f["write_fence_blocks_readers"])),
        ("writer's fence attached: poll POLLOUT (a writer)", poll_answer(f["write_fence_blocks_writers"])),
        ("writer's fence: debugfs bufinfo lists", "; ".join(f["bufinfo_fence_lines"]) or "nothing"),
        ("writer's fence: sync_file for a reader", f"driver {wsf['driver']}, timeline {wsf['timeline']}, "
                                                   f"status {wsf['status']}; its poll "
                                                   f"{poll_answer(f['write_sync_file_blocks'])}"),
        ("a reader's fence beside the unsignalled writer's", f["second_fence_beside_writer"]),
        ("after VGEM_FENCE_SIGNAL: POLLIN / POLLOUT", f"{_yn(f['after_read_ready'], 'ready', 'blocked')} / "
                                                      f"{_yn(f['after_write_ready'], 'ready', 'blocked')}"),
        ("signalling the same fence again", f["signal_again"]),
        ("reader's fence attached: poll POLLIN (a reader)", poll_answer(f["read_fence_blocks_readers"])),
        ("reader's fence attached: poll POLLOUT (a writer)", poll_answer(f["read_fence_blocks_writers"])),
        ("reader's fence: sync_file for a writer", f"driver {rsf['driver']}, status {rsf['status']}"),
        ("a writer's fence beside the unsignalled reader's", f["writer_beside_reader"]),
        ("IMPORT_SYNC_FILE of another buffer's pending fence (as a writer)",
         f"{f['import_rc']}; then POLLIN {poll_answer(f['import_blocks_readers'])}, ready after that fence "
         f"signalled: {f['import_ready_after_signal']}"),
        ("DRM_CAP_SYNCOBJ; SYNCOBJ_CREATE on vgem", f"{f['cap_syncobj']}; {f['syncobj_create']}"),
    ]
    if "never" in f:
        n = f["never"]
        rows.append(("a fence nobody signals: poll POLLIN (limit "
                     f"{n['poll_limit_s']:.0f} s)", f"ready after {n['waited_s']:.1f} s (vgem's timer); signalling it "
                                                    f"then: {n['late_signal']}"))
    return figures.Table(rows, ("question", "the kernel's answer"),
                         caption=f"{ev.mode.value.upper()} · {transcript.source_line(ev)}")


def waits(ev: Evidence) -> list[dict]:
    """Every timed wait of the run: what waited, on what, how long (ms, guest clock)."""
    f = facts(ev.require())
    t = f["poll_timeout_ms"]
    rows = [{"wait": "poll(dma-buf, POLLIN), writer's fence pending", "ms": f["poll_waited_ms"],
             "ended_by": f"its {t} ms timeout"}]
    rows += [{"wait": f"{w['call']}, signalled after {w['signal_after_ms']} ms", "ms": w["waited_ms"],
              "ended_by": "the signal" if w["woke"] else "NOT woken"} for w in f["wakeups"]]
    if "never" in f:
        rows.append({"wait": "poll(dma-buf, POLLIN), fence nobody signals", "ms": f["never"]["waited_s"] * 1000,
                     "ended_by": f"vgem's {VGEM_FENCE_TIMEOUT_S} s timer"})
    return rows


def figure_waits(ev: Evidence) -> figures.CourseFigure:
    """How long each wait lasted (log scale), labelled with what ended it."""
    import plotly.graph_objects as go

    rows = waits(ev)
    style = {"timeout": ("#999999", ""), "signal": ("#0072B2", "/"), "timer": ("#D55E00", "x")}
    kinds = ["timeout" if "timeout" in r["ended_by"] else "timer" if "timer" in r["ended_by"] else "signal"
             for r in rows]
    fig = go.Figure(go.Bar(
        y=[r["wait"] for r in rows], x=[r["ms"] for r in rows], orientation="h", name="time waited (ms)",
        text=[f"{r['ms']:.1f} ms — {r['ended_by']}" for r in rows], textposition="auto",
        marker={"color": [style[k][0] for k in kinds], "pattern": {"shape": [style[k][1] for k in kinds]}},
        hovertemplate="%{y}: %{x:.1f} ms<extra></extra>"))
    fig.update_layout(title="How long a waiter waited for a vgem fence (guest clock, emulated)", height=420,
                      margin={"l": 20})
    fig.update_xaxes(title="time waited (ms, log scale; the guest's CLOCK_MONOTONIC)", type="log", range=[1, 4.5])
    fig.update_yaxes(autorange="reversed")
    return figures.CourseFigure(fig, [(ev.mode, f"{transcript.source_line(ev)} — a real Linux kernel (vgem) under "
                                                "QEMU; emulated timings, not hardware")])


def describe(ev: Evidence) -> str:
    """The figure and the table in words, generated from the data."""
    f = facts(ev.require())
    parts = [f"With a writer's fence pending, poll for reading {'timed out' if f['write_fence_blocks_readers'] else 'returned'}"
             f" after {f['poll_waited_ms']:.0f} ms and poll for writing "
             f"{'timed out too' if f['write_fence_blocks_writers'] else 'returned'}; with only a reader's fence, "
             f"reading was {'blocked' if f['read_fence_blocks_readers'] else 'ready at once'} and writing "
             f"{'blocked' if f['read_fence_blocks_writers'] else 'ready'}."]
    for w in f["wakeups"]:
        parts.append(f"{w['call']} waited {w['waited_ms']:.0f} ms for a signal sent after {w['signal_after_ms']} ms.")
    if "never" in f:
        parts.append(f"A fence nobody signalled held poll for {f['never']['waited_s']:.1f} s, until vgem's timer "
                     f"signalled it; signalling it afterwards gave {f['never']['late_signal']}.")
    parts.append(f"SYNCOBJ_CREATE on vgem: {f['syncobj_create']}.")
    return " ".join(parts)


def waits_csv(ev: Evidence) -> str:
    """The figure's data as CSV."""
    return "wait,ms,ended_by\n" + "".join(f"\"{r['wait']}\",{r['ms']:.3f},{r['ended_by']}\n" for r in waits(ev))
