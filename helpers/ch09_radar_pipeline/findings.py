"""Chapter 9's sentences that depend on data, computed from the Evidence the page shows.

Nothing here is fixed text about a result: whether every design met every deadline, how a live
run compares with the reference recording, what the key points say about the source's rates.
Each sentence takes its verb from the Evidence ("measured now on …" live, "recorded on …" in
replay), never from the author, and in live mode sets the reference recording beside the
learner's value and names a difference beyond the spreads with its likely cause.

    findings.deadlines(measured)                  # every design at the source's two rates
    findings.beside_reference(measured, recorded) # live: the learner's medians beside the reference's
    findings.key_points(measured, breaking)       # the data-dependent key points
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from helpers.ch09_radar_pipeline.breaking import breaking_points
from helpers.core.evidence import Evidence
from helpers.models.radar import designs, metrics
from helpers.models.radar.designs import DESIGNS


def said(ev: Evidence, short: bool = False) -> str:
    """How these values came to be, by the Evidence's mode (`Evidence.said`); short: the GPU only."""
    return ev.said_short if short else ev.said


def _who(evidence: Sequence[Evidence], short: bool = False) -> str:
    return " and ".join(dict.fromkeys(said(ev, short) for ev in evidence if ev.ok))


def _rate_label(n: int, period: float) -> str:
    return f"{n >> 20} MiB every {period * 1e3:g} ms ({n / period / 1e9:.1f} GB/s)"


def deadline_outcomes(runs: list[dict]) -> list[dict]:
    """Per seed rate (4 and 16 MiB every 8 ms): the designs that met every deadline (no late and no dropped
    frame) and, for the others, their late frames, frames, slowest frame and drops."""
    out = []
    for n, period in designs.SEED_RATES:
        mine = [r for r in runs if r["frame_bytes"] == n and r["period_s"] == period]
        met, missed = [], []
        for r in mine:
            s = metrics.result_summary(r)
            if s["misses"] == 0 and s["dropped"] == 0:
                met.append(r["design"])
            else:
                missed.append({"design": r["design"], "late": s["misses"], "frames": s["n"],
                               "max_ms": s["max_ms"], "dropped": s["dropped"]})
        out.append({"frame_bytes": n, "period_s": period, "ran": [r["design"] for r in mine], "met": met,
                    "missed": missed})
    return out


def _missed_text(m: dict, period: float) -> str:
    parts = []
    if m["late"]:
        parts.append(f"{m['late']} of {m['frames']:,} frames late (slowest {m['max_ms']:.3f} ms against the "
                     f"{period * 1e3:g} ms period)")
    if m["dropped"]:
        parts.append(f"{m['dropped']} dropped")
    return f"{m['design']}: " + ", ".join(parts)


def deadlines(measured: Sequence[Evidence]) -> str:
    """Whether every design met every deadline at the source's rates, from one run each in `measured`
    (the radar.<design> Evidence shown), in the Evidence's own words."""
    runs = metrics.runs_of(measured)
    frames = sorted({len(r["latency_us"]) for r in runs})
    lines = [f"From one run of each design ({' / '.join(f'{f:,}' for f in frames)} frames), {_who(measured)}:"]
    for o in deadline_outcomes(runs):
        label = _rate_label(o["frame_bytes"], o["period_s"])
        if not o["ran"]:
            lines.append(f"• {label}: not run.")
        elif not o["missed"]:
            lines.append(f"• {label}: all {len(o['ran'])} designs met every deadline.")
        else:
            ok = ", ".join(o["met"]) or "no design"
            lines.append(f"• {label}: {ok} met every deadline; "
                         + "; ".join(_missed_text(m, o["period_s"]) for m in o["missed"]) + ".")
    lines.append(tail_caveat(runs))
    return "\n".join(lines)


def tail_caveat(runs: list[dict]) -> str:
    """What one run's p99.9 rests on, from the number of frames in the runs."""
    n = min((len(r["latency_us"]) for r in runs), default=0)
    if not n:
        return "No frames to judge a tail from."
    beyond = max(1, round(n / 1000))
    return (f"A p99.9 from one run of {n:,} frames rests on its {beyond} largest sample{'s' if beyond > 1 else ''}: "
            "one descheduling moves it, so these runs do not rank the designs by their tails (section 5 does, "
            "with repeated runs and an interval).")


# -- live beside the reference -------------------------------------------------------------------
def _parts(r: dict) -> dict:
    """Median latency, its interquartile range, and the medians of its copy and processing (ms)."""
    lat = np.asarray(r["latency_us"], dtype=float) / 1e3
    q1, med, q3 = np.percentile(lat, [25, 50, 75])
    copy = (r.get("copy_us_p50") or 0.0) / 1e3
    kern = (r.get("kernel_us_p50") or 0.0) / 1e3
    return {"p50": float(med), "q1": float(q1), "q3": float(q3), "copy": copy, "kernel": kern,
            "host": float(med) - copy - kern}


def _pairs(here: list[dict], ref: list[dict]) -> list[tuple[dict, dict]]:
    by = {(r["design"], r["frame_bytes"], r["period_s"]): r for r in ref}
    return [(r, by[(r["design"], r["frame_bytes"], r["period_s"])]) for r in here
            if (r["design"], r["frame_bytes"], r["period_s"]) in by]


def differs(a: dict, b: dict) -> bool:
    """Two runs' median latencies differ beyond their spreads: their interquartile ranges do not overlap."""
    return a["q3"] < b["q1"] or b["q3"] < a["q1"]


def beside_rows(measured: Sequence[Evidence], recorded: Sequence[Evidence]) -> list[tuple]:
    """Rows: design, rate, median latency [IQR] here and in the reference, ratio, copy and processing medians."""
    rows = []
    for h, r in _pairs(metrics.runs_of(measured), metrics.runs_of(recorded)):
        a, b = _parts(h), _parts(r)
        rows.append((h["design"], f"{h['frame_bytes'] >> 20} MiB / {h['period_s'] * 1e3:g} ms",
                     f"{a['p50']:.2f} [{a['q1']:.2f}, {a['q3']:.2f}]", f"{b['p50']:.2f} [{b['q1']:.2f}, {b['q3']:.2f}]",
                     f"{a['p50'] / b['p50']:.2f}x", f"{a['copy']:.2f} / {b['copy']:.2f}",
                     f"{a['kernel']:.2f} / {b['kernel']:.2f}", "yes" if differs(a, b) else "no"))
    return rows


BESIDE_HEADERS = ("design", "frame / period", "median ms [IQR], here", "median ms [IQR], reference", "here / ref",
                  "copy ms here / ref", "processing ms here / ref", "beyond the spreads?")

CAUSES = {
    "copy": ("the copy: for `pageable` the CPU's staging of every byte (host CPU and memory bandwidth), for the "
             "pinned designs the link and the host's memory behind it"),
    "kernel": ("the processing (copy end to kernels end): at these frame sizes it is set as much by the CPU issuing "
               "the FFTs' launches as by arithmetic (section 8's model parameters say whether it grows with the "
               "frame), so by the host CPU, and by the GPU's clocks"),
    "host": ("the host's part (the consumer taking the frame, a staging memcpy, polling and noticing the done "
             "event): the host CPU, its scheduling, and in a virtual machine the vCPUs and the host under them"),
}


def host_facts(ev: Evidence) -> str:
    """The recorded machine's host facts its provenance holds (CPU model, kernel)."""
    host = (ev.provenance or {}).get("host") or {}
    return ", ".join(f"{k} {v}" for k, v in (("CPU", host.get("cpu")), ("kernel", host.get("kernel"))) if v)


def beside_reference(measured: Sequence[Evidence], recorded: Sequence[Evidence], here_host: str = "") -> str:
    """Live: the learner's median latencies beside the reference recording's, whether they differ by more
    than their spreads (interquartile ranges), and where the difference lies (copy, processing or the
    host's part) with its likely cause. In replay there is nothing to set beside: it says so."""
    if not any(ev.live for ev in measured):
        return f"These runs were {_who(measured)}: there is no live run here to set beside the reference."
    pairs = [(_parts(h), _parts(r), h) for h, r in _pairs(metrics.runs_of(measured), metrics.runs_of(recorded))]
    if not pairs:
        return "The reference recording has no run at these designs and rates to set beside this machine's."
    ref_src = next(ev.source for ev in recorded if ev.ok)
    apart = [(a, b, h) for a, b, h in pairs if differs(a, b)]
    ratios = [a["p50"] / b["p50"] for a, b, _ in pairs]
    head = (f"Median latency {_who(measured)} against the reference (recorded on {ref_src}): "
            f"{min(ratios):.2f}x to {max(ratios):.2f}x the reference's, beyond the spreads (interquartile ranges "
            f"that do not overlap) in {len(apart)} of {len(pairs)} runs.")
    if not apart:
        return head + " Within their spreads, this machine agrees with the reference."
    share = {k: float(np.mean([a[k] - b[k] for a, b, _ in apart])) for k in ("copy", "kernel", "host")}
    total = float(np.mean([a["p50"] - b["p50"] for a, b, _ in apart]))
    main = max(share, key=lambda k: abs(share[k]))
    way = "slower" if total > 0 else "faster"
    facts = host_facts(next(ev for ev in recorded if ev.ok))
    return (f"{head} Where they differ this machine is {way} by {abs(total):.2f} ms on average: "
            f"copy {share['copy']:+.2f} ms, processing {share['kernel']:+.2f} ms, the host's part "
            f"{share['host']:+.2f} ms. The largest part is {CAUSES[main]}. "
            f"Reference host: {facts or 'not recorded'}" + (f"; this host: {here_host}" if here_host else "") + ".")


# -- the source question and the key points ------------------------------------------------------
def source_answers(measured: Sequence[Evidence], recorded: Sequence[Evidence]) -> list[str]:
    """Source question 002's answers from the runs the page shows, named by their mode; live, the
    reference recording's answers follow, labelled as the reference's."""
    out = [f"{_who(measured)}:"] + ["• " + line for line in source_verdicts(metrics.runs_of(measured))]
    if any(ev.live for ev in measured) and all(ev.ok for ev in recorded):
        out += [f"Reference, {_who(recorded)}:"]
        out += ["• " + line for line in source_verdicts(metrics.runs_of(recorded))]
    return out


def breaking_lines(breaking: Evidence, reference: Evidence | None = None) -> list[str]:
    """Each design's breaking point in the Evidence's words; live, the reference recording's beside them."""
    out = [f"Breaking points, {said(breaking)}:"]
    mine = breaking_points(breaking.require())
    theirs = (breaking_points(reference.data) if breaking.live and reference is not None and reference.ok
              else None)
    for design, verdict in mine.items():
        out.append(f"• {design}: {verdict}" + (f" (reference, {said(reference)}: {theirs[design]})" if theirs else ""))
    if breaking.data.get("truncated"):
        out.append("cut by the time budget: " + ", ".join(breaking.data["truncated"]))
    return out


def thread_copies(measured: Sequence[Evidence], recorded: Sequence[Evidence], thread: dict) -> list[str]:
    """The thread's 16 MB copy times beside the runs' median copy times (pageable, registered ring), in the
    runs' own words; live, the reference recording's too."""
    def line(evs: Sequence[Evidence], who: str) -> str:
        by = {r["design"]: r for r in metrics.runs_of(evs, frame_bytes=16 << 20)}
        pg, rg = by["pageable"]["copy_us_p50"] * 1e-6, by["registered"]["copy_us_p50"] * 1e-6
        n = 16 << 20
        return (f"{who}: pageable {pg * 1e3:.2f} ms ({n / pg / 1e9:.1f} GB/s), registered ring {rg * 1e3:.2f} ms "
                f"({n / rg / 1e9:.1f} GB/s): {thread['pageable_s'] / pg:.0f}x and {thread['pinned_s'] / rg:.0f}x "
                f"faster than in the thread, {rg / thread['period_s']:.1%} of the period for the pinned path.")
    out = [line(measured, _who(measured))]
    if any(ev.live for ev in measured) and all(ev.ok for ev in recorded):
        out.append(line(recorded, f"reference, {_who(recorded)}"))
    return out


def key_points(measured: Sequence[Evidence], breaking: Evidence | None = None) -> list[str]:
    """The key points that depend on data: the source's rates, and where the designs separate."""
    runs = metrics.runs_of(measured)
    pts = []
    outcomes = deadline_outcomes(runs)
    if all(o["ran"] and not o["missed"] for o in outcomes):
        pts.append(f"At the source's rates (4 MB and 16 MB every 8 ms) every design met every deadline in the runs "
                   f"{_who(measured, True)}; one run cannot rank their tails.")
    else:
        bad = sorted({m["design"] for o in outcomes for m in o["missed"]})
        pts.append(f"At the source's rates (4 MB and 16 MB every 8 ms), in the runs {_who(measured, True)}, "
                   f"{', '.join(bad)} missed or dropped frames: a deadline is met or missed by the slowest frame, "
                   "and one run cannot rank tails.")
    if breaking is not None and breaking.ok:
        bp = breaking_points(breaking.data)
        pts.append(f"Raising the load ({said(breaking, True)}): " + "; ".join(f"{d} {v}" for d, v in bp.items())
                   + ". Repeat runs, put an interval on the tail, and compare designs where they separate.")
    return pts


# -- the capture ring and the timeline -------------------------------------------------------------
def consumer_text(frames: int, period_s: float, work_s: float, seen: int, lost: int) -> str:
    """The CPU consumer runs of section 1 in words: what the ring accounted for, and the slow consumer's
    share against the one its work per frame predicts (this machine's CPU, measured now)."""
    if seen + lost != frames:
        account = f"seen + lost = {seen + lost}, not the {frames} frames the card produced: the ring lost count"
    else:
        account = f"seen + lost = {frames}, every frame the card produced"
    ideal = work_s / period_s
    got = frames / seen if seen else float("inf")
    line = (f"Measured now on this machine's CPU: the slow consumer saw {seen} of {frames} frames ({account}), one in "
            f"{got:.1f}; {work_s * 1e3:g} ms of work per {period_s * 1e3:g} ms frame predicts one in {ideal:.1f}, "
            "plus the ring's head start.")
    if got > 1.2 * ideal:
        line += (" It saw fewer: each frame cost it more than its work (taking, touching and releasing the frame, "
                 "the polling between frames, and a CPU shared with other processes).")
    return line


def timeline_text(ev: Evidence) -> str:
    """What the radar.timeline runs show about overlap, in the Evidence's words: per design, how many frames
    arrived while the previous one was still in flight, and how many copies ran under the previous kernels."""
    out, overlapped = [], 0
    for run in ev.require()["runs"]:
        tl = sorted(run["extra"]["timeline"], key=lambda f: f["seq"])
        pairs = list(zip(tl, tl[1:], strict=False))
        early = sum(1 for a, b in pairs if b["ready_ms"] < a["seen_ms"])
        under = sum(1 for a, b in pairs if b["copy_ms"][0] < a["kernels_ms"][1])
        overlapped += early + under
        busy = float(np.median([f["seen_ms"] - f["ready_ms"] for f in tl])) if tl else 0.0
        out.append(f"{run['design']}: {early} of {len(pairs)} frames arrived before the previous one was done, "
                   f"{under} copies ran while the previous frame's kernels did; a frame took {busy:.2f} ms (median) "
                   f"of its {run['period_s'] * 1e3:g} ms period")
    text = f"In the runs {said(ev)}: " + "; ".join(out) + "."
    if not overlapped:
        text += (" No frame came while another was in flight, so there was nothing to overlap: at this rate both "
                 "designs finish each frame before the next arrives.")
    return text


def timeline_lines(ev: Evidence, reference: Evidence | None = None) -> list[str]:
    """timeline_text of the runs shown and, live, of the reference recording's runs beside them."""
    out = [timeline_text(ev)]
    if ev.live and reference is not None and reference.ok:
        out.append("Reference: " + timeline_text(reference))
    return out


def source_verdicts(runs: list[dict]) -> list[str]:
    """Answers to source question 002's questions, decided from the recorded runs (one run of each
    design at each rate: deadlines and CPU time are read from it, a ranking of tails is not)."""
    s = {(r["design"], r["frame_bytes"]): metrics.result_summary(r) for r in runs}
    out = []
    for n, label in ((4 << 20, "4 MB / 8 ms"), (16 << 20, "16 MB / 8 ms (2 GB/s)")):
        ok = [d for d in DESIGNS if (d, n) in s and s[(d, n)]["misses"] == 0 and s[(d, n)]["dropped"] == 0]
        bad = [d for d in DESIGNS if (d, n) in s and d not in ok]
        out.append(f"At {label}: {len(ok)} of {len(ok) + len(bad)} designs met every deadline "
                   f"({', '.join(ok) or 'none'})" + (f"; missed or dropped: {', '.join(bad)}." if bad else "."))
    for n in (4 << 20, 16 << 20):
        pg, st, rg = s.get(("pageable", n)), s.get(("staged", n)), s.get(("registered", n))
        if pg and st and rg:
            frames = min(pg["n"], st["n"], rg["n"])
            out.append(f"{n >> 20} MiB: p99.9 {pg['p999_ms']:.2f} ms (copy from the mapping), {st['p999_ms']:.2f} ms "
                       f"(memcpy to pinned, then copy), {rg['p999_ms']:.2f} ms (registered ring), one run of {frames:,} "
                       f"frames each: a p99.9 of {frames:,} frames rests on its {max(1, round(frames / 1000))} or so "
                       "largest samples, so these tails are not ranked here (the repeated runs of section 5 do that); "
                       f"CPU use {pg['cpu_pct']:.0f}% / {st['cpu_pct']:.0f}% / {rg['cpu_pct']:.0f}%.")
    return out
