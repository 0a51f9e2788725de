"""Chapter 9's data-dependent sentences against every recording the course has and perturbed copies of it:
a design that misses, a slower host, a live run that agrees, a breaking rule applied to short runs. No
sentence may contradict what the data say (counted here directly from the frames), and the wording
follows the mode: a live value is never "recorded", a replayed one never "measured now"."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
import pytest
from conftest import recorded_machine

from helpers.ch09_radar_pipeline import breaking, findings, pipeline_runs
from helpers.core import errors
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode
from helpers.models.radar import designs, metrics

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = sorted(p.parent for p in (ROOT / "data" / "reference").glob("*/manifest.json"))
WITH_RADAR = [p for p in RECORDINGS if all(f"radar.{d}" in recorded_machine(p)["experiments"] for d in designs.DESIGNS)]


def test_the_course_has_a_recording_with_the_radar_runs():
    assert RECORDINGS and WITH_RADAR  # the parametrised tests below run on every such recording


def _doc(path: Path) -> dict:
    return recorded_machine(path)


def _evidence(doc: dict, eid: str, mode: Mode, data=None, source=None) -> Evidence:
    label = source or f"{doc['provenance']['gpu']['name']} · {doc['name']}"
    return Evidence(eid, copy.deepcopy(data if data is not None else doc["experiments"][eid]["data"]), mode, label,
                    why="test", provenance=doc["provenance"])


def _designs(doc: dict, mode: Mode, change=None, source=None) -> list[Evidence]:
    out = []
    for d in designs.DESIGNS:
        data = copy.deepcopy(doc["experiments"][f"radar.{d}"]["data"])
        for r in data["runs"]:
            if change:
                change(r)
        out.append(_evidence(doc, f"radar.{d}", mode, data, source))
    return out


def _late(runs: list[dict]) -> set[tuple[str, int]]:
    """(design, frame size) of every run with a frame later than its period or a dropped frame, counted directly."""
    return {(r["design"], r["frame_bytes"]) for r in runs
            if r["dropped"] or any(x > r["period_s"] * 1e6 for x in r["latency_us"])}


def _text(measured, breaking=None, recorded=None) -> str:
    recorded = recorded or measured
    return "\n".join([findings.deadlines(measured), findings.beside_reference(measured, recorded),
                      *findings.key_points(measured, breaking), *findings.source_answers(measured, recorded)])


def _no_contradiction(measured: list[Evidence]) -> None:
    late = _late(metrics.runs_of(measured))
    lines = findings.deadlines(measured).splitlines()
    for n in (4 << 20, 16 << 20):
        line = next(x for x in lines if x.startswith(f"• {n >> 20} MiB every 8 ms"))
        mine = {d for d, size in late if size == n}
        assert ("all 4 designs met every deadline" in line) == (not mine), line
        for design in mine:
            assert re.search(rf"{design}: (\d+ of [\d,]+ frames late|\d+ dropped)", line), (design, line)
    first = findings.key_points(measured)[0]
    assert ("every design met every deadline" in first) == (not late), first
    assert ("missed or dropped" in first) == bool(late), first


def _one_late(r: dict) -> None:
    if r["design"] == "staged" and r["frame_bytes"] == 16 << 20:
        r["latency_us"][7] = int(r["period_s"] * 1e6 * 1.12)  # 8.96 ms at 8 ms: the live H100 run of issue 38


def _drops(r: dict) -> None:
    if r["design"] == "pageable" and r["frame_bytes"] == 4 << 20:
        r["dropped"] = 3


@pytest.mark.parametrize("path", WITH_RADAR, ids=lambda p: p.stem)
@pytest.mark.parametrize("change", [None, _one_late, _drops], ids=["as recorded", "one late frame", "drops"])
@pytest.mark.parametrize("mode", [Mode.REPLAY, Mode.LIVE])
def test_no_sentence_contradicts_the_deadlines(path, change, mode):
    doc = _doc(path)
    measured = _designs(doc, mode, change)
    _no_contradiction(measured)
    answers = "\n".join(findings.source_answers(measured, _designs(doc, Mode.REPLAY)))
    for n, label in ((4 << 20, "4 MB / 8 ms"), (16 << 20, "16 MB / 8 ms (2 GB/s)")):
        bad = len({d for d, size in _late(metrics.runs_of(measured)) if size == n})
        assert f"At {label}: {4 - bad} of 4 designs met every deadline" in answers


@pytest.mark.parametrize("path", WITH_RADAR, ids=lambda p: p.stem)
def test_wording_follows_the_mode(path):
    doc = _doc(path)
    rec = _designs(doc, Mode.REPLAY)
    replayed = _text(rec, _evidence(doc, "radar.breaking_point", Mode.REPLAY), rec)
    assert "measured now" not in replayed and "recorded on" in replayed
    live = _designs(doc, Mode.LIVE, source="NVIDIA H100 here")
    text = _text(live, _evidence(doc, "radar.breaking_point", Mode.LIVE, source="NVIDIA H100 here"), rec)
    text += "\n".join(findings.thread_copies(live, rec, {"pageable_s": 9e-3, "pinned_s": 5e-3, "period_s": 8e-3}))
    text += "\n".join(findings.breaking_lines(_evidence(doc, "radar.breaking_point", Mode.LIVE, source="here"),
                                              _evidence(doc, "radar.breaking_point", Mode.REPLAY)))
    assert "measured now on NVIDIA H100 here" in text
    for m in re.finditer(r"recorded on", text):  # recorded only where the reference is named beside a live value
        assert "reference" in text[max(0, m.start() - 40):m.start()].lower(), text[max(0, m.start() - 80):m.end() + 40]


@pytest.mark.parametrize("path", WITH_RADAR, ids=lambda p: p.stem)
def test_a_live_run_beside_the_reference_names_where_it_differs(path):
    doc = _doc(path)
    rec = _designs(doc, Mode.REPLAY)
    same = findings.beside_reference(_designs(doc, Mode.LIVE), rec)
    assert "1.00x to 1.00x" in same and "in 0 of" in same and "agrees with the reference" in same

    def slower_processing(r):  # +1.4 ms of processing on every frame: a slower host issuing the FFTs
        r["latency_us"] = [x + 1400 for x in r["latency_us"]]
        r["kernel_us_p50"] += 1400
    text = findings.beside_reference(_designs(doc, Mode.LIVE, slower_processing), rec, "CPU test, kernel 1")
    assert "slower by" in text and findings.CAUSES["kernel"] in text and "this host: CPU test" in text
    assert "agrees" not in text

    def slower_copy(r):
        r["latency_us"] = [x + 1400 for x in r["latency_us"]]
        r["copy_us_p50"] += 1400
    text = findings.beside_reference(_designs(doc, Mode.LIVE, slower_copy), rec)
    assert findings.CAUSES["copy"] in text and findings.CAUSES["kernel"] not in text
    rows = findings.beside_rows(_designs(doc, Mode.LIVE, slower_copy), rec)
    assert len(rows) == 8 and all(r[-1] == "yes" for r in rows)
    assert "no live run" in findings.beside_reference(rec, rec)


def _sweep_run(design, n, period, frames, late=0, dropped=0):
    lat = [int(period * 0.6e6)] * frames
    for i in range(late):
        lat[i] = int(period * 1.2e6)
    return {"design": design, "frame_bytes": n, "period_s": period, "frames": frames, "buffers": 1,
            "latency_us": lat, "dropped": dropped, "cpu_s": 0.1, "wall_s": 1.0, "extra": {"sync": "poll-loop"}}


def _sweep(rule=None):
    """Every design at 16 MiB / 8 ms, five runs of 40 frames; staged has one late frame in one run (0.5% of the
    point), pageable five (2.5%)."""
    sweep = []
    for d in designs.DESIGNS:
        late = {"staged": [1, 0, 0, 0, 0], "pageable": [1, 1, 1, 1, 1]}.get(d, [0] * 5)
        sweep += [_sweep_run(d, 16 << 20, 8e-3, 40, k) for k in late]
    data = {"ladder": [[16 << 20, 8e-3], [16 << 20, 4e-3]], "sweep": sweep, "realtime": [], "truncated": []}
    if rule:
        data["rule"] = rule
    return data


def test_the_breaking_rule_counts_a_points_frames_and_says_so():
    pooled, per_run = _sweep("pooled"), _sweep()
    bp = breaking.breaking_points(pooled)
    assert bp["staged"].startswith("held") and bp["pageable"].startswith("breaks at 16 MiB every 8 ms")
    assert "counted over all its runs" in breaking.rule_text(pooled) and "2.5%" in breaking.rule_text(pooled)
    old = breaking.breaking_points(per_run)  # a recording climbed with the per-run rule keeps its own verdicts
    assert old["staged"].startswith("breaks at 16 MiB every 8 ms") and "per-run rule" in breaking.rule_text(per_run)
    assert "less than one frame" in breaking.rule_text(per_run)
    rows = {r[0]: r for r in breaking.breaking_rows(pooled)}
    assert rows["staged"][-1] == "holds (1 late)" and rows["staged"][6] == "1 of 200"
    assert rows["pageable"][-1] == "BREAKS" and rows["registered"][-1] == "holds"
    with pytest.raises(errors.InputError):
        breaking.miss_rule({"rule": "whatever", "sweep": []})


@pytest.mark.parametrize("rule", ["pooled", None])
def test_the_key_points_say_what_the_breaking_points_say(rule):
    doc = _doc(WITH_RADAR[0])
    data = _sweep(rule)
    ev = _evidence(doc, "radar.breaking_point", Mode.LIVE, data, source="here")
    pts = findings.key_points(_designs(doc, Mode.LIVE, source="here"), ev)
    bp = breaking.breaking_points(data)
    for design, verdict in bp.items():
        assert f"{design} {verdict}" in pts[1]
    assert ("staged breaks" in pts[1]) == (rule is None)


@pytest.mark.parametrize("path", WITH_RADAR, ids=lambda p: p.stem)
def test_the_recorded_sweep_keeps_its_verdicts_under_its_own_rule(path):
    data = _doc(path)["experiments"]["radar.breaking_point"]["data"]
    for design, verdict in breaking.breaking_points(data).items():
        mine = [r for r in data["sweep"] if r["design"] == design]
        broke_somewhere = any(breaking.broke(r) for r in mine) if breaking.miss_rule(data) == "per-run" else None
        if broke_somewhere is not None:
            assert verdict.startswith("breaks") == broke_somewhere


def _markdown(name: str) -> str:
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_the_page_states_no_deadline_result_as_fixed_text():
    """The claims a live run contradicted (issue 38) are computed now, never written into the page."""
    text = " ".join(_markdown("09_radar_pipeline.ipynb").split())
    for claim in ("meets every deadline", "met every deadline", "has room to spare", "by a tenth of a millisecond",
                  "today's H100 meets"):
        assert claim not in text, claim


@pytest.mark.parametrize("path", WITH_RADAR, ids=lambda p: p.stem)
def test_the_timeline_sentence_counts_overlap_from_the_events(path):
    doc = _doc(path)
    ev = _evidence(doc, "radar.timeline", Mode.REPLAY)
    text = findings.timeline_text(ev)
    runs = ev.data["runs"]

    def pairs(run):
        tl = sorted(run["extra"]["timeline"], key=lambda f: f["seq"])
        return list(zip(tl, tl[1:], strict=False))

    def overlaps(run):
        return sum(b["copy_ms"][0] < a["kernels_ms"][1] for a, b in pairs(run))

    def early(run):
        return sum(b["ready_ms"] < a["seen_ms"] for a, b in pairs(run))
    for run in runs:
        assert f"{overlaps(run)} copies ran while the previous frame's kernels did" in text
        assert f"{run['design']}: {early(run)} of {len(pairs(run))} frames arrived" in text
    assert ("nothing to overlap" in text) == (not any(overlaps(r) + early(r) for r in runs))

    def squeeze(data):  # frames every 0.2 ms: each copy starts under the previous frame's kernels
        for run in data["runs"]:
            for k, f in enumerate(sorted(run["extra"]["timeline"], key=lambda f: f["seq"])):
                f["ready_ms"] = f["copy_ms"][0] = 0.2 * k
                f["copy_ms"][1], f["kernels_ms"] = 0.2 * k + 0.3, [0.2 * k + 0.3, 0.2 * k + 0.9]
                f["seen_ms"] = 0.2 * k + 1.0
    data = copy.deepcopy(ev.data)
    squeeze(data)
    busy = findings.timeline_text(_evidence(doc, "radar.timeline", Mode.LIVE, data, source="GPU here"))
    assert "nothing to overlap" not in busy and "measured now on GPU here" in busy and "recorded" not in busy


def test_the_consumer_sentence_checks_the_rings_account():
    assert "one in 3.8" in findings.consumer_text(80, 2e-3, 5e-3, 21, 59)
    assert "It saw fewer" in findings.consumer_text(80, 2e-3, 5e-3, 21, 59)
    assert "It saw fewer" not in findings.consumer_text(80, 2e-3, 5e-3, 33, 47)
    assert "lost count" in findings.consumer_text(80, 2e-3, 5e-3, 33, 40)


def test_the_recorder_climbs_past_a_point_with_one_late_frame_in_its_runs(monkeypatch):
    """One late frame in one of a point's runs (0.5% of its frames) no longer stops the climb; more than 1% does."""
    from helpers.core import experiments

    calls = {"staged": 0, "pageable": 0}

    def fake(cfg):
        design, period, frames = cfg.design, cfg.period_s, cfg.frames
        lat = [int(period * 0.7e6)] * frames  # not clear: every point runs REPEATS times
        if design in calls and cfg.sync is None:
            calls[design] += 1
            late = 1 if design == "staged" and calls[design] == 1 else (frames if design == "pageable" else 0)
            for i in range(late):
                lat[i] = int(period * 1.2e6)
        return metrics.RunResult(design=design, frame_bytes=cfg.frame_bytes, period_s=period, slots=4, buffers=1,
                                 frames=frames, latency_us=lat, seq=list(range(frames)), dropped=0, cpu_s=0.1,
                                 wall_s=1.0, extra={"sync": cfg.sync or "poll-loop"})

    monkeypatch.setattr(pipeline_runs, "run_pipeline", fake)
    out = experiments.get("radar.breaking_point").run(False)  # the full ladder: 5 runs of 40 frames at 8 ms
    assert out["rule"] == "pooled" and breaking.miss_rule(out) == "pooled"
    assert calls["staged"] == len(breaking.LADDER) * breaking.REPEATS  # climbed on after the late frame
    assert calls["pageable"] == breaking.REPEATS  # broke at the first point
    bp = breaking.breaking_points(out)
    assert bp["pageable"].startswith("breaks at 4 MiB") and "the top of the sweep" in bp["staged"]


@pytest.mark.parametrize("path", WITH_RADAR, ids=lambda p: p.stem)
def test_a_live_timeline_stands_beside_the_reference(path):
    doc = _doc(path)
    ref = _evidence(doc, "radar.timeline", Mode.REPLAY)
    assert len(findings.timeline_lines(ref, ref)) == 1
    live = findings.timeline_lines(_evidence(doc, "radar.timeline", Mode.LIVE, source="GPU here"), ref)
    assert live[0].startswith("In the runs measured now on GPU here") and live[1].startswith("Reference: In the runs recorded")
