"""Chapter 9's breaking points: when a load point breaks (the miss rule), the ladder of loads the
recorder climbs, and what repeated runs say: tails with bootstrap intervals, verdicts and the tables
of radar.breaking_point's sweep and real-time runs."""

from __future__ import annotations

import numpy as np

from helpers.core import validate
from helpers.core.errors import InputError
from helpers.models.radar.designs import DESIGNS, RadarInputError

LADDER = ((4 << 20, 8e-3), (16 << 20, 8e-3), (16 << 20, 4e-3), (16 << 20, 2e-3), (32 << 20, 2e-3),
          (32 << 20, 1e-3))  # 0.5, 2.1, 4.2, 8.4, 16.8 and 33.6 GB/s
QUICK_LADDER = LADDER[:2]
REPEATS, QUICK_REPEATS = 5, 2
# A rung whose first run's slowest frame took at most CLEAR_MARGIN of the period (a 2x margin) is
# run once; any other rung REPEATS times. Replayed on the 5-repeat H100 sweep of 2026-11-21 this
# rule gives the same verdict at every rung and the same breaking point for every design (in the
# rungs it would run once, no frame of any of the five runs took more than 0.83 of the period) and
# saves 24 of its 60 sweep runs; the table's runs column says how many each rung got.
CLEAR_MARGIN = 0.5
RT_POINT = (16 << 20, 4e-3)
RT_CONFIGS = (("poll", False), ("spin", False), ("blocking", False), ("poll", True))
RT_REPEATS = 3  # per real-time configuration (was 5): each run pools 75 frames into the interval
SWEEP_BUDGET_S, QUICK_BUDGET_S = 110.0, 14.0
MISS_LIMIT = 0.01  # a load point "breaks" when more than 1% of its frames miss, or any frame is dropped
# How the 1% is counted. A run is about 0.3 s: 40 frames at 8 ms, where one late frame is already 2.5%,
# so a rule applied per run cannot tell 1% from "any late frame". "pooled" (the recorder's rule from
# issue 38 on) counts late frames over all the runs of a point (5 x 40 = 200 frames at 8 ms: 1% is 2 of
# them); "per-run", the rule of recordings made before, breaks a point when any one of its runs breaks.
MISS_RULES = ("pooled", "per-run")
MISS_RULE = "pooled"


def frames_for(period_s: float, quick: bool) -> int:
    """Frames per run: about 0.3 s of frames, 40 … 300 (20 when quick)."""
    return 20 if quick else int(min(300, max(40, round(0.3 / period_s))))


def clear(r: dict) -> bool:
    """True when every frame of the run finished within CLEAR_MARGIN of the period (and none was
    dropped): a rung so far from breaking that repeating it would not change its verdict."""
    return r["dropped"] == 0 and bool(r["latency_us"]) and max(r["latency_us"]) <= CLEAR_MARGIN * r["period_s"] * 1e6


def late_frames(r: dict) -> int:
    """Frames of the run whose latency exceeded the period (a deadline miss)."""
    return sum(1 for x in r["latency_us"] if x > r["period_s"] * 1e6)


def broke(r: dict) -> bool:
    """A run breaks when a frame is dropped or more than MISS_LIMIT of its frames miss the deadline."""
    return r["dropped"] > 0 or late_frames(r) > MISS_LIMIT * r["frames"]


def point_broke(runs: list[dict], rule: str = MISS_RULE) -> bool:
    """Whether a load point breaks, from all its runs: 'pooled' (a frame dropped, or more than MISS_LIMIT
    of the point's frames, counted over its runs, late) or 'per-run' (any one run breaks)."""
    validate.choice(rule, "miss rule", MISS_RULES)
    if rule == "per-run":
        return any(broke(r) for r in runs)
    return (any(r["dropped"] for r in runs)
            or sum(late_frames(r) for r in runs) > MISS_LIMIT * sum(r["frames"] for r in runs))


def miss_rule(data: dict) -> str:
    """The rule a radar.breaking_point result was climbed with (recordings without one: 'per-run')."""
    rule = data.get("rule", "per-run")
    if rule not in MISS_RULES:
        raise InputError(f"radar.breaking_point: unknown miss rule {rule!r}")
    return rule


def rule_text(data: dict) -> str:
    """The breaking rule of this result in words, with what 1% is in frames at each period it ran."""
    rule = miss_rule(data)
    per_point: dict = {}
    for r in data["sweep"]:
        key = r["period_s"]
        per_point.setdefault(key, set()).add(r["frames"])
    sizes = ", ".join(f"{max(f)} frames a run at {p * 1e3:g} ms" for p, f in sorted(per_point.items(), reverse=True))
    if rule == "pooled":
        points = _groups(data["sweep"], ("design", "frame_bytes", "period_s")).values()
        pooled = min((sum(r["frames"] for r in rs) for rs in points if len(rs) > 1), default=0)
        least = (f", so at least {pooled} frames a point, of which {MISS_LIMIT:.0%} is {pooled * MISS_LIMIT:g}"
                 if pooled else "")
        return (f"A load point breaks when a frame is dropped or more than {MISS_LIMIT:.0%} of its frames, counted "
                f"over all its runs, miss the deadline ({sizes}; {data.get('repeats', REPEATS)} runs at a point that "
                f"is not clear{least}). A single run is too short for a 1% rule: at 40 frames one late frame is "
                "already 2.5%.")
    return (f"This result was climbed with the earlier per-run rule: a load point breaks when any one of its runs "
            f"drops a frame or has more than {MISS_LIMIT:.0%} of its frames late ({sizes}). 1% of a run of 40 or 75 "
            "frames is less than one frame, so there a single late frame breaks the point; the recorder now counts "
            "late frames over all the runs of a point (re-record with `python -m helpers.record --only "
            "radar.breaking_point`).")


# -- repeated runs: tails with an uncertainty ----------------------------------------------------
def bootstrap_ci(values, *, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean of `values` (one number per run) and a bootstrap confidence interval
    over runs, resampling whole runs (seeded, so the page shows the same interval every time)."""
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        raise RadarInputError("no runs to put an interval on")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, (n_boot, v.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(v.mean()), float(lo), float(hi)


def tail_stats(runs: list[dict], rule: str = MISS_RULE) -> dict:
    """Over repeated runs of one configuration: p99 and p99.9 of each run, their means with bootstrap
    intervals, misses, drops, CPU share, and whether the point broke under `rule`."""
    p99 = [float(np.percentile(r["latency_us"], 99)) / 1e3 for r in runs if r["latency_us"]]
    p999 = [float(np.percentile(r["latency_us"], 99.9)) / 1e3 for r in runs if r["latency_us"]]
    misses = sum(sum(1 for x in r["latency_us"] if x > r["period_s"] * 1e6) for r in runs)
    return {"runs": len(runs), "frames": sum(len(r["latency_us"]) for r in runs),
            "p50_ms": float(np.median([x for r in runs for x in r["latency_us"]])) / 1e3 if p99 else None,
            "p99": bootstrap_ci(p99) if p99 else None, "p999": bootstrap_ci(p999) if p999 else None,
            "misses": misses, "dropped": sum(r["dropped"] for r in runs),
            "cpu_pct": 100 * sum(r["cpu_s"] for r in runs) / max(sum(r["wall_s"] for r in runs), 1e-9),
            "broke": point_broke(runs, rule)}


def _groups(runs: list[dict], keys) -> dict:
    out: dict = {}
    for r in runs:
        out.setdefault(tuple(r[k] if not callable(k) else k(r) for k in keys), []).append(r)
    return out


def _ci(x, single: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x[0]:.2f} (one run)" if single else f"{x[0]:.2f} [{x[1]:.2f}, {x[2]:.2f}]"


def breaking_rows(data: dict) -> list[tuple]:
    """One row per design and load point of radar.breaking_point: tails with 95% intervals, verdict."""
    rows, rule = [], miss_rule(data)
    for (design, n, period), rs in _groups(data["sweep"], ("design", "frame_bytes", "period_s")).items():
        t = tail_stats(rs, rule)
        one = t["runs"] == 1  # a clear rung: no interval from one run
        verdict = "BREAKS" if t["broke"] else "holds" if not t["misses"] else f"holds ({t['misses']} late)"
        rows.append((design, f"{n >> 20} MiB / {period * 1e3:g} ms", f"{n / period / 1e9:.1f}",
                     f"1 (clear: slowest frame <= {CLEAR_MARGIN:.0%} of the period)" if one else t["runs"],
                     _ci(t["p99"], one), _ci(t["p999"], one), f"{t['misses']} of {t['frames']}", t["dropped"],
                     f"{t['cpu_pct']:.0f}", verdict))
    return rows


BREAKING_HEADERS = ("design", "frame / period", "GB/s", "runs", "p99 ms [95% CI]", "p99.9 ms [95% CI]",
                    "late frames", "dropped", "CPU %", "verdict")


def breaking_points(data: dict) -> dict[str, str]:
    """design -> the first load point at which it broke (or 'held up to …' the highest it ran)."""
    out, rule = {}, miss_rule(data)
    ladder = [tuple(x) for x in data.get("ladder", LADDER)]
    cut = data.get("truncated") or []
    for design in DESIGNS:
        mine = [r for r in data["sweep"] if r["design"] == design]
        points = list(dict.fromkeys((r["frame_bytes"], r["period_s"]) for r in mine))
        first = next((p for p in points
                      if point_broke([r for r in mine if (r["frame_bytes"], r["period_s"]) == p], rule)), None)
        if first:
            out[design] = f"breaks at {first[0] >> 20} MiB every {first[1] * 1e3:g} ms ({first[0] / first[1] / 1e9:.1f} GB/s)"
        elif points:
            n, p = points[-1]
            where = f"{n >> 20} MiB every {p * 1e3:g} ms ({n / p / 1e9:.1f} GB/s)"
            if ladder and (n, p) == ladder[-1]:
                out[design] = f"held up to {where}, the top of the sweep"
            elif any(t.startswith(design + " ") for t in cut):
                out[design] = f"held up to {where}; the sweep's time budget ran out before the next point"
            else:
                out[design] = f"held at every point it ran, up to {where}"
        else:
            out[design] = "not run (the sweep's time budget ran out)"
    return out


def separated(a: dict, b: dict, which: str = "p99") -> bool:
    """True when the two configurations' tail intervals do not overlap: only then does a ranking stand."""
    x, y = a[which], b[which]
    return x is not None and y is not None and (x[2] < y[1] or y[2] < x[1])


def realtime_rows(data: dict) -> list[tuple]:
    """One row per real-time configuration: wait mode, scheduler granted, tails with intervals, CPU."""
    rows = []
    for (sync, rt), rs in _groups(data["realtime"], (lambda r: r["extra"]["sync"],
                                                     lambda r: "; ".join(r["extra"].get("realtime", {}).values())
                                                     or "default scheduler")).items():
        t = tail_stats(rs)
        rows.append((sync, rt, t["runs"], f"{t['p50_ms']:.3f}" if t["p50_ms"] is not None else "—", _ci(t["p99"]),
                     t["misses"], t["dropped"], f"{t['cpu_pct']:.0f}"))
    return rows


REALTIME_HEADERS = ("wait", "scheduler / CPU", "runs", "p50 ms", "p99 ms [95% CI]", "misses", "dropped", "CPU %")

