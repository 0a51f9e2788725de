"""Planted submissions: hard-coded answers score 0 on their parts, a bug costs only its own part.

Every planted submission (the instructor's source lab with some solution cells replaced) is
graded by the course's grader, as `make grade` does: in one class run, each lab of each
planted student in its own sandboxed worker (plain child processes where bubblewrap is
missing), the checks and hidden cases in the grader's process. A hard-coded answer — one that
reproduces the published examples (it passes them in the student version, which `labsim`
shows by running the notebook's own check cells) or the constant the issue found — must score
0 on its parts; a bug planted in an early part must cost that part and nothing else, because
later parts are graded with the reference in its place.
"""

import sys
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]
import labsim  # noqa: E402
import redteam  # noqa: E402

from tools.grader import labgrade, sandbox  # noqa: E402

pytestmark = pytest.mark.slow  # whole classes through the sandboxed grader

FULL = {
    "lab2": {"timed_copy_events": 4, "benchmark_warmup": 4, "benchmark_agrees": 5, "fit_synthetic": 5,
             "predict_reference": 4, "batch_slowdown": 3},
    "lab3": {"rd_matches_reference": 5, "rd_finds_target": 3, "deadline_report": 4, "choose_design": 6,
             "choose_design_cheapest": 4},
    "lab4": {"buddy_examples": 3, "buddy_properties": 7, "policy_cyclic": 4, "policy_hot_cold": 4,
             "policy_priority": 2, "kernel_match": 5},
    "lab5": {"check_route_time": 5, "check_makespan": 5, "check_best_routes": 10, "check_order": 5},
}

# ------------------------------------------------------------------------ hard-coded answers
HARD_CODED = {
    # the one-liner: the design that happened to pass Lab 3 Part 3 (and Part 4 without a GPU)
    "lab3": ({"choose_design_code": '''
def choose_design(frame_bytes, period_s, deadline_s, params):
    return {"design": "registered", "buffers": 1, "slots": 4}
'''}, {"choose_design", "choose_design_cheapest"}),
    # the two-line policy (MRU) wins the cyclic runs and loses the hot/cold ones
    "lab4": ({"policy_impl": '''
def make_policy():
    def policy(candidates, needed, model):
        lowest = candidates[0].priority
        return max((c for c in candidates if c.priority == lowest), key=lambda c: c.last_use)
    return policy
'''}, {"policy_hot_cold"}),
    # the published recording, looked up instead of a model: right on the examples, wrong elsewhere
    "lab2": ({"predict": '''
def predict_time(nbytes, t0_s, bw_Bps):
    n, t = lab2.reference_sweep(recorded_sweep, "pinned", "h2d")
    return np.interp(np.asarray(nbytes, dtype=float), n, t)


def batch_slowdown(count, nbytes_each, t0_s, bw_Bps):
    n, t = lab2.reference_sweep(recorded_sweep, "pinned", "h2d")
    m = dict(zip(n.astype(int).tolist(), t.tolist(), strict=True))
    return count * m[nbytes_each] / m[count * nbytes_each]
'''}, {"predict_reference", "batch_slowdown"}),
    # the published answers, looked up
    "lab5": ({"makespan": '''
def makespan(M, transfers, paths):
    return next(c.want for c in lab5.examples("makespan") if [tuple(p) for p in c.paths] == [tuple(p) for p in paths])
'''}, {"check_makespan"}),
}
# Lab 4's allocator, hard-coded to the published examples (a second one for Lab 4)
BUDDY_REPLAY = '''
class Buddy:
    def __init__(self, total: int):
        self.total, self.max_order = total, total.bit_length() - 1
        ex = {t: (list(o), f) for t, r, o, f in lab4.BUDDY_EXAMPLES}
        self.offsets, self.after = ex.get(total, ([], {}))
        self.live = []

    def alloc(self, n: int) -> int:
        if n >= self.total or not self.offsets:
            raise MemoryError("full")
        self.live.append(self.offsets.pop(0))
        return self.live[-1]

    def free_block(self, offset: int) -> None:
        if offset not in self.live:
            raise ValueError(offset)
        self.live.remove(offset)

    def free_lists(self) -> dict:
        return self.after if self.live else {self.max_order: [0]}
'''


@pytest.mark.parametrize("lab", sorted(HARD_CODED))
def test_hard_coded_answers_score_zero_on_their_parts(lab, graded):
    planted, parts = HARD_CODED[lab]
    got, feedback = graded(f"hard-coded-{lab}", lab)
    for part in parts:
        assert got[part] == 0, f"{lab} {part}: a hard-coded answer earned {got[part]} points"
    for part in set(FULL[lab]) - parts:  # the rest of the submission is the worked solution
        assert got[part] == FULL[lab][part], (part, feedback[part])


@pytest.mark.parametrize("lab", ["lab2", "lab5"])
def test_lookups_of_the_published_answers_pass_the_published_examples(lab, monkeypatch):
    """What makes them hard-coded: in the student version (published examples only) they pass."""
    planted, parts = HARD_CODED[lab]
    shown = labsim.score(lab, planted, monkeypatch=monkeypatch, hidden=False)
    assert all(shown[p] == FULL[lab][p] for p in parts), {p: labsim.FEEDBACK.get(p) for p in parts}


def test_a_buddy_that_replays_the_examples_passes_them_and_scores_zero(monkeypatch, graded):
    shown = labsim.score("lab4", {"buddy_impl": BUDDY_REPLAY}, monkeypatch=monkeypatch, hidden=False)
    assert shown["buddy_examples"] == 3, labsim.FEEDBACK.get("buddy_examples")
    got, _ = graded("buddy-replay", "lab4")
    assert got["buddy_examples"] == 0 and got["buddy_properties"] == 0
    assert got["policy_cyclic"] == 4 and got["policy_hot_cold"] == 4


OWN_IMPLEMENTATION = {"lab2": {"fit_line": '''
def fit_line(nbytes, times_s):
    f = copy_cost.fit(np.asarray(nbytes, dtype=int), np.asarray(times_s, dtype=float))
    return f.t0_s, f.bandwidth_Bps
'''}, "lab3": {"range_doppler_code": '''
def range_doppler(xp, frame, mf):
    return dsp.doppler_map(xp, frame, mf)
'''}}


def test_calling_the_courses_own_implementation_scores_zero(graded):
    lab2, feedback = graded("own-implementation-lab2", "lab2")
    assert lab2["fit_synthetic"] == 0 and "copy_cost.fit" in feedback["fit_synthetic"]
    lab3, feedback = graded("own-implementation-lab3", "lab3")
    assert lab3["rd_matches_reference"] == 0 and lab3["rd_finds_target"] == 0
    assert "doppler_map" in feedback["rd_matches_reference"]  # refused as the course's own, not a NameError
    assert lab3["deadline_report"] == 4


# ------------------------------------------------------------------------ one bug, one part
BUGS = {
    # fit in seconds without weights: t0 is lost in the noise of the largest copies
    "lab2": ({"fit_line": '''
def fit_line(nbytes, times_s):
    n = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    slope, t0 = np.polyfit(n, t, 1)
    return float(t0), float(1 / slope)
'''}, {"fit_synthetic"}),
    # the Doppler FFT without fftshift
    "lab3": ({"range_doppler_code": '''
def range_doppler(xp, frame, mf):
    compressed = xp.fft.ifft(xp.fft.fft(frame, axis=1) * mf, axis=1)
    rd = xp.fft.fft(compressed, axis=0)
    return (rd.real ** 2 + rd.imag ** 2).astype(xp.float32)
'''}, {"rd_matches_reference", "rd_finds_target"}),
    # frees without merging buddies
    "lab4": ({"buddy_impl": '''
class Buddy:
    def __init__(self, total: int):
        self.total = total
        self.max_order = total.bit_length() - 1
        self.free = {o: set() for o in range(self.max_order + 1)}
        self.free[self.max_order].add(0)
        self.allocated = {}

    def alloc(self, n: int) -> int:
        order = math.ceil(math.log2(n))
        for o in range(order, self.max_order + 1):
            if self.free[o]:
                break
        else:
            raise MemoryError(n)
        offset = min(self.free[o])
        self.free[o].remove(offset)
        while o > order:
            o -= 1
            self.free[o].add(offset + (1 << o))
        self.allocated[offset] = order
        return offset

    def free_block(self, offset: int) -> None:
        if offset not in self.allocated:
            raise ValueError(offset)
        self.free[self.allocated.pop(offset)].add(offset)

    def free_lists(self) -> dict:
        return {o: sorted(s) for o, s in self.free.items() if s}
'''}, {"buddy_examples", "buddy_properties"}),
    # a route's time without the links' latencies; makespan, best routes and order use route_time
    "lab5": ({"route_time": '''
def route_time(M, path, nbytes):
    total = 0.0
    for a, b in zip(path[:-1], path[1:], strict=True):
        if not M.has(a, b):
            raise ValueError(f"no link {a} -> {b}")
        total += nbytes / M.bandwidth_Bps[(a, b)]
    return total
'''}, {"check_route_time"}),
}


@pytest.mark.parametrize("lab", sorted(BUGS))
def test_a_bug_in_an_early_part_costs_only_that_part(lab, graded):
    planted, parts = BUGS[lab]
    got, feedback = graded(f"bug-{lab}", lab)
    lost = {p for p, v in got.items() if v < FULL[lab][p]}
    assert lost == parts, {p: feedback[p] for p in lost ^ parts}


@pytest.mark.parametrize("lab", sorted(FULL))
def test_the_worked_solutions_score_full_points_on_hidden_cases(lab, graded):
    got, feedback = graded(f"solution-{lab}", lab)
    assert got == FULL[lab], {p: feedback[p] for p in got if got[p] != FULL[lab][p]}


# ------------------------------------------------------------------------ the class run
def _planted() -> dict[str, tuple[str, dict]]:
    """student -> (lab, replaced solution cells), every planted submission above."""
    out = {f"hard-coded-{lab}": (lab, cells) for lab, (cells, _) in HARD_CODED.items()}
    out["buddy-replay"] = ("lab4", {"buddy_impl": BUDDY_REPLAY})
    out |= {f"own-implementation-{lab}": (lab, cells) for lab, cells in OWN_IMPLEMENTATION.items()}
    out |= {f"bug-{lab}": (lab, cells) for lab, (cells, _) in BUGS.items()}
    out |= {f"solution-{lab}": (lab, {}) for lab in FULL}
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """graded(student, lab) -> ({grade_id: points}, {grade_id: feedback}) from one class run."""
    folder = tmp_path_factory.mktemp("planted")
    for student, (lab, cells) in _planted().items():
        redteam.write(folder, student, lab, redteam.notebook(lab, cells))
    report = labgrade.grade(folder, sandboxed=sandbox.available() is None)
    labgrade.print_report(report)

    def get(student: str, lab: str):
        results = [r for r in report[student] if r.lab == lab]
        return {r.grade_id: r.score for r in results}, {r.grade_id: r.feedback for r in results}

    return get
