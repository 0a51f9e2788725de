"""Chapter 7, the GPU's own account: which hardware channel ran each stream's copies and kernels.

Section 5 says a stream is an ordering, not one hardware ring: the CUDA driver pushes a stream's
kernels into a channel of the compute engine and its copies into channels of the copy engines.
CUPTI's activity records (helpers.measure.cupti_trace) carry, for every copy and kernel, the
stream it came from, the channel that ran it and that channel's type, with device timestamps.

`submission.cupti_channels` records two cases:
- "two": two non-blocking streams, each copying a pinned host buffer to the GPU, doubling it
  with a kernel and copying it back;
- "many": the same on more streams than CUDA's default pool of connections (8, see
  CUDA_DEVICE_MAX_CONNECTIONS), with small buffers, to see whether streams share channels.
Where CUPTI cannot trace (no cupti-python, a driver that forbids profiling) the run is skipped
with `cupti_trace.unavailable_reason()`, and the page replays the recording.
"""

from __future__ import annotations

from helpers.core import gpu
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.experiments import GPU, experiment
from helpers.core.gpu import cp, cupyx
from helpers.measure import cupti_trace
from helpers.measure.transfers import wait_event
from helpers.presentation import channel_lanes, figures

TIMEOUT_S = 30.0
MiB = 1 << 20
DEFAULT_CONNECTIONS = 8  # CUDA_DEVICE_MAX_CONNECTIONS when unset (CUDA's environment-variable reference)


def streams_on_channels(streams, hosts, devs) -> list[dict]:
    """Each stream copies its pinned host buffer to the GPU, doubles it there and copies it
    back, while CUPTI records which hardware channel ran each step, and when."""
    with cupti_trace.trace() as tr:
        for s, h, d in zip(streams, hosts, devs, strict=True):
            with s:                        # work below goes to stream s
                d.set(h, stream=s)         # host -> device
                d *= 2                     # a kernel
                d.get(stream=s, out=h)     # device -> host
        for s in streams:                  # wait (with a timeout) before the trace closes
            done = cp.cuda.Event()
            done.record(s)
            wait_event(done, TIMEOUT_S, "the traced copies and kernels")
    return tr.records


def run_case(code, n_streams: int, nbytes: int) -> dict:
    """Buffers and streams for one case, a warm-up outside the trace (compiles the kernel,
    sets up the channels), then the traced run. Returns the records and the case's shape."""
    gpu.cupy()  # NoGPUError here, before any buffer, when there is no GPU
    n = nbytes // 4
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    hosts = [cupyx.empty_pinned(n, dtype="float32") for _ in range(n_streams)]
    devs = [cp.empty(n, dtype="float32") for _ in range(n_streams)]
    for h in hosts:
        h[:] = 1.0
    for s, d in zip(streams, devs, strict=True):
        with s:
            d *= 2
        s.synchronize()
    records = code(streams, hosts, devs)
    return {"streams": n_streams, "nbytes": nbytes, "records": records}


@experiment("submission.cupti_channels", chapter=7, needs=(GPU,),
            title="CUPTI activity records: the hardware channel of each stream's copies and kernels")
def record_channels(quick: bool, code=streams_on_channels) -> dict:
    """Two streams with big buffers, then more streams than the default connection pool."""
    cupti_trace.skip_unless_available()
    two = run_case(code, 2, (16 if quick else 64) * MiB)
    many = run_case(code, 4 if quick else 16, 4 * MiB)
    return {"two": two, "many": many}


# -- what the records show (pure) -----------------------------------------------------------------
def streams_in(records) -> list[int]:
    """Stream ids in order of their first record."""
    return list(dict.fromkeys(r["stream"] for r in sorted(records, key=lambda r: r["start_ns"])))


def two_summary(records) -> dict:
    """Channels per stream per sort of work; whether the two streams' kernels / h2d / d2h went
    to different channels; how long their work overlapped; channels one stream used."""
    recs = cupti_trace.check_records(records)
    ids = streams_in(recs)
    if len(ids) < 2:
        raise InputError(f"the two-stream case needs records from two streams, found {len(ids)}")
    a, b = ids[:2]
    by = cupti_trace.channels_by_stream(recs)
    apart = {what: bool(by[a].get(what)) and bool(by[b].get(what))
             and not set(by[a][what]) & set(by[b][what]) for what in ("kernel", "HtoD", "DtoH")}
    own = {s: sorted({r["channel"] for r in recs if r["stream"] == s}) for s in (a, b)}
    ov = cupti_trace.set_overlap([r for r in recs if r["stream"] == a], [r for r in recs if r["stream"] == b])
    return {"streams": [a, b], "channels": {a: by[a], b: by[b]}, "apart": apart,
            "own_channels": own, "overlap": ov,
            "types": {s: sorted({r["channel_type"] for r in recs if r["stream"] == s}) for s in (a, b)}}


def pool_summary(records) -> dict:
    """For the many-streams case: how many streams, how many distinct channels their kernels
    and their h2d copies used, and the most streams that shared one channel."""
    recs = cupti_trace.check_records(records)
    out = {"streams": len(streams_in(recs))}
    for what in ("kernel", "HtoD", "DtoH"):
        per_channel: dict[int, set[int]] = {}
        for r in recs:
            if (r["copy"] or r["kind"]) == what:
                per_channel.setdefault(r["channel"], set()).add(r["stream"])
        out[what] = {"channels": len(per_channel),
                     "most_streams_on_one": max((len(s) for s in per_channel.values()), default=0)}
    return out


# -- the page's views -------------------------------------------------------------------------
def lanes_figure(ev: Evidence, case: str = "two"):
    """The chosen case's records on per-channel lanes (live or replayed, from the Evidence)."""
    if not ev.ok:
        return ev
    data = ev.require()
    if case not in ("two", "many"):
        raise InputError(f"case must be 'two' or 'many', not {case!r}")
    recs = data[case]["records"]
    names = {s: f"stream {chr(65 + i)}" if i < 26 else f"stream {s}" for i, s in enumerate(streams_in(recs))}
    n = data[case]["streams"]
    what = ("two streams: h2d, kernel, d2h each" if case == "two" else f"{n} streams" + (
        f", more than CUDA's default {DEFAULT_CONNECTIONS} connections" if n > DEFAULT_CONNECTIONS else ""))
    return channel_lanes.lanes_figure(recs, ev.parts, f"Which channel ran what, {what}", names)


def channel_rows(ev: Evidence) -> list[tuple[str, ...]]:
    """Rows: stream, sort of work, channel ids (the two-stream case)."""
    s = two_summary(ev.require()["two"]["records"])
    rows = []
    for i, sid in enumerate(s["streams"]):
        for what, chans in s["channels"][sid].items():
            rows.append((f"stream {chr(65 + i)} (CUPTI id {sid})", what, ", ".join(map(str, chans))))
    return rows


def first_stream_channels(ev: Evidence) -> int:
    """How many distinct channels stream A's three steps ran on (the prediction's answer)."""
    s = two_summary(ev.require()["two"]["records"])
    return len(s["own_channels"][s["streams"][0]])


def kinds(types: list[str]) -> str:
    """'copy-engine and compute channels' for a stream's channel types."""
    words = sorted(channel_lanes.LANE_TEXT.get(t, t) for t in types)
    return " and ".join(words) + (" channels" if len(words) > 1 else " channel(s) only")


def channels_text(ev: Evidence) -> str:
    """What the records show, in sentences computed from them (both cases)."""
    if not ev.ok:
        return str(ev.missing or ev.why)
    data = ev.require()
    s = two_summary(data["two"]["records"])
    a, b = s["streams"]
    said = ev.said_short
    lines = channel_lanes.skip_note(ev) + [f"{said[0].upper()}{said[1:]}: stream A's work ran on {len(s['own_channels'][a])} channels "
             f"({', '.join(map(str, s['own_channels'][a]))}), {kinds(s['types'][a])}; stream B's on "
             f"{len(s['own_channels'][b])} ({', '.join(map(str, s['own_channels'][b]))}), {kinds(s['types'][b])}."]
    for what, label in (("kernel", "kernels"), ("HtoD", "host-to-device copies"), ("DtoH", "device-to-host copies")):
        lines.append(f"The two streams' {label} ran on {'different' if s['apart'][what] else 'shared'} channels.")
    ov = s["overlap"]
    lines.append(f"Their work overlapped for {ov['ns'] / 1e3:.0f} µs: {ov['frac_a']:.0%} of stream A's busy time "
                 f"and {ov['frac_b']:.0%} of B's.")
    p = pool_summary(data["many"]["records"])
    lines.append(f"With {p['streams']} streams, their kernels ran on {p['kernel']['channels']} compute channel(s) "
                 f"(up to {p['kernel']['most_streams_on_one']} streams on one) and their host-to-device copies on "
                 f"{p['HtoD']['channels']} copy channel(s) (up to {p['HtoD']['most_streams_on_one']} on one).")
    return "\n".join(lines)


def table(ev: Evidence):
    """The channels table, or the Evidence itself (which says why) when there is no data."""
    if not ev.ok:
        return ev
    return figures.Table(channel_rows(ev), ("stream", "work", "channel(s)"),
                         caption=ev.caption("CUPTI channel ids per stream and sort of work"))
