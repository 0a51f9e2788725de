"""The one way a notebook or lab gets an experiment's data: `ctx.get(id, **params) -> Evidence`.

    ev = ctx.get("pinning.cost_vs_size", frames=200)
    ev.data, ev.mode, ev.source, ev.why   # the numbers, LIVE or REPLAY, which machine, and why

The rules, the same for every experiment:
1. The parameters are checked first, by the validators the experiment declares: bad input
   always raises InputError / InputTypeError, live or replay, and is never replayed over.
2. Live or replay is decided once, from the course's mode and what the experiment declares
   it needs (a GPU, two GPUs, strace, nvcc). A missing need means replay, with the reason in
   `why`.
3. Live: the experiment runs in this process exactly as the recorder runs it (when other
   processes hold a context on the GPU, its source says "contended: N other processes"); its result is
   round-tripped through JSON (so live and replay hand views the same plain types) and
   CuPy's memory pools are released afterwards. An experiment that raises SkipExperiment
   falls back to replay, with its reason in `why`.
4. Code on the page: an experiment whose measuring function the notebook shows (its `code`
   parameter) takes the learner's version, `ctx.get(id, code=my_fn)`. Live, that version runs
   and the Evidence says so (`changed_code`, and in its caption); in replay the recording of the
   course's own function is shown and `why` says the changed code runs only on a GPU.
5. Replay: the experiment's own recording on its reference machine,
   data/reference/<machine>/<id>.json (also on request, `recorded=True`, to set the reference
   machine beside a live measurement); the Evidence's source is that recording's label (GPU, driver,
   CUDA, link, date), its provenance the recording's. A machine without it raises
   ReferenceDataError naming the command that records it, unless the experiment declares, once, in
   its registration, that it is optional on that machine (`optional_on`): then it comes back as an
   Evidence whose data is None and whose `missing` says why.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import KW_ONLY, dataclass, field

from helpers.core import experiments, gpu, shown
from helpers.core.errors import InputError, InputTypeError, ReferenceDataError, SkipExperiment
from helpers.core.mode import Mode

# How a sentence names where a value came from, by mode: prose takes its verb from the Evidence,
# never from the author's sentence (a live value is never "recorded", a model's never "measured").
VERBS = {Mode.LIVE: "measured now", Mode.REPLAY: "recorded", Mode.SIMULATED: "the model gives"}
# Words that claim a recording or a measurement; `wording_problems` finds them next to the wrong mode.
_WRONG_WORDS = {Mode.LIVE: ("recorded", "recording", "reference machine"),
                Mode.SIMULATED: ("measured",)}


def said(mode: Mode | str, source: str) -> str:
    """'measured now on X', 'recorded on X' or 'the model gives (X)': the phrase a sentence uses
    for a value of this mode from this source."""
    m = Mode(mode)
    return f"the model gives ({source})" if m is Mode.SIMULATED else f"{VERBS[m]} on {source}"


def wording_problems(text: str, mode: Mode | str) -> list[str]:
    """The words of `text` that contradict `mode`: 'recorded'/'reference machine' for a live value,
    'measured' for a model. Empty when the wording fits. A sentence that names the reference
    recording on purpose, beside a live value, says "reference" and the file (see `beside`)."""
    low = text.lower()
    return [w for w in _WRONG_WORDS.get(Mode(mode), ()) if w in low]


@dataclass(frozen=True)
class Evidence:
    """Data of one experiment, how it came to be, and where from."""

    experiment_id: str
    data: dict | None
    mode: Mode
    source: str  # the GPU measured now, or the reference machine's label
    _: KW_ONLY
    why: str  # why this mode: "measured now on ...", or the reason live was not possible
    provenance: dict = field(default_factory=dict, repr=False)  # machine, driver, CUDA, date
    missing: str | None = None  # set (and data None) when an optional recording is absent
    params: dict = field(default_factory=dict)  # the parameters of a live run
    changed_code: str | None = None  # the name of the learner's changed function, when it ran live

    @property
    def ok(self) -> bool:
        """True when there is data to show."""
        return self.data is not None

    @property
    def live(self) -> bool:
        return self.mode is Mode.LIVE

    @property
    def parts(self) -> list[tuple[Mode, str]]:
        """Provenance parts for figures.CourseFigure and tables."""
        return [(self.mode, self.source)]

    @property
    def verb(self) -> str:
        """'measured now', 'recorded' or 'the model gives': the verb for this Evidence's values."""
        return VERBS[self.mode]

    @property
    def said(self) -> str:
        """'measured now on <GPU>' or 'recorded on <reference machine>' (see `said`)."""
        return said(self.mode, self.source)

    @property
    def said_short(self) -> str:
        """`said` naming only the machine's first label part (its GPU), for a key point."""
        return said(self.mode, self.source.split(" · ")[0])

    def require(self) -> dict:
        """The data, or ReferenceDataError saying why there is none."""
        if self.data is None:
            raise ReferenceDataError(self.missing or f"{self.experiment_id}: no data")
        return self.data

    def caption(self, what: str) -> str:
        """A one-line caption naming the mode and the machine (views use it; notebooks never
        write their own)."""
        if self.mode is Mode.LIVE:
            yours = f", with your changed {self.changed_code}" if self.changed_code else ""
            return f"{what} (LIVE: measured now on {self.source}{yours})"
        return f"{what} (REPLAY: recorded on {self.source})"

    def _repr_markdown_(self) -> str:
        state = self.missing or f"{self.mode.value.upper()}, {self.source}"
        return f"**{self.experiment_id}** — {state}. *Why:* {self.why}"

    def __repr__(self) -> str:
        return f"<Evidence {self.experiment_id}: {self.missing or self.mode.value + ' · ' + self.source}>"


def missing_needs(exp: experiments.Experiment, live: bool, live_reason: str, forced_replay: bool = False) -> str | None:
    """Why `exp` cannot run live here (None: it can). A forced replay replays everything."""
    from helpers.core import config

    if forced_replay:
        return live_reason
    for need in exp.needs:
        if need == experiments.GPU and not live:
            return live_reason
        if need == experiments.TWO_GPUS:
            if not live:
                return live_reason
            n = gpu.probe().device_count
            if n < 2:
                return f"this machine has {n} GPU: {exp.id} needs two"
        if need == experiments.STRACE:
            found, why = config.strace_binary()
            if found is None:
                return why
        if need == experiments.NVCC and not config.bwcheck_ready():
            return "nvcc is not installed here and the C cross-check is not built (run `make bwcheck`)"
        if need == experiments.QEMU and config.qemu_missing():
            return config.qemu_missing()
    return None


def get(ctx, experiment_id: str, *, quick: bool = False, recorded: bool = False, code=None, **params) -> Evidence:
    """Evidence for `experiment_id` under the rules in the module docstring (ctx: a course Context)."""
    exp = experiments.get(experiment_id)
    checked = exp.check_params(params)
    yours = _learners_code(exp, code)
    if recorded:
        return _replay(ctx, exp, "the reference machine's recording, asked for by name", {})
    why = missing_needs(exp, ctx.live, ctx.reason, ctx.forced_replay)
    if why is None:
        try:
            return _run_live(ctx, exp, checked, quick, code, yours)
        except SkipExperiment as exc:
            why = f"the live run was skipped: {exc}"
    if yours:
        why += (f"; your changed {yours} runs only live, on a CUDA GPU: this is what the course's own "
                f"{exp.shown.__name__} gave")
    return _replay(ctx, exp, why, checked)


def _learners_code(exp: experiments.Experiment, code) -> str | None:
    """The name of the learner's function when it differs from the page's; None when it is the same
    (or none was given). Code for an experiment that shows none, or a non-function, is refused."""
    if code is None:
        return None
    if exp.shown is None:
        raise InputError(f"experiment {exp.id!r} shows no measuring code on the page, so it takes no code=")
    if not callable(code):
        raise InputTypeError(f"{exp.id}: code must be a function like {exp.shown.__name__}, got {type(code).__name__}")
    return getattr(code, "__name__", "function") if shown.changed(code, exp.shown) else None


def _run_live(ctx, exp: experiments.Experiment, params: dict, quick: bool, code, yours: str | None) -> Evidence:
    extra = {} if code is None else {"code": code}
    try:
        data = json.loads(json.dumps(exp.run(quick, **params, **extra)))  # the plain JSON a recording holds
    finally:
        gpu.release_pools()
    others = gpu.other_processes() if ctx.gpu_name else None
    contended = gpu.contention_note(others)
    source = (ctx.gpu_name or "this machine") + (f" ({contended})" if contended else "")
    prov = {"gpu": source, "measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "quick": quick, "params": params, "changed_code": yours, "other_processes": others}
    why = f"measured now on {source}" + (f", running your changed {yours}" if yours else "")
    return Evidence(exp.id, data, Mode.LIVE, source, why=why, provenance=prov, params=params, changed_code=yours)


def _replay(ctx, exp: experiments.Experiment, why: str, params: dict) -> Evidence:
    if params:
        why += (f"; the recording was made with the recorder's own parameters, not "
                f"{', '.join(f'{k}={v!r}' for k, v in params.items())}")
    optional = exp.reference in exp.optional_on
    if exp.reference == experiments.KERNEL_LAB_REFERENCE:  # a VM transcript, not a GPU recording
        from helpers.core import transcript

        try:
            t = transcript.load(exp.id)
        except ReferenceDataError as exc:
            return _missing(exp, str(exc), why, optional, source="no kernel-lab transcript")
        return Evidence(exp.id, t.data, Mode.REPLAY, t.label, why=why, provenance=t.provenance)
    try:
        ref = ctx.reference(exp.reference)
    except ReferenceDataError as exc:
        return _missing(exp, str(exc), why, optional, source="no reference machine")
    own = exp.recorded_in or exp.id
    if not ref.file(own).exists():
        fix = (f"{ref.name} has no recording of {own!r}, so {exp.id} cannot be replayed. Record it on a GPU "
               f"with `python -m helpers.record --only {own} --out {ref.path}`")
        return _missing(exp, fix, why, optional, source=ref.label)
    rec = ref.recording(own)  # validated: a damaged file raises, never replays
    if rec.skipped is not None:
        return _missing(exp, f"{ref.name}: {own} was not recorded there: {rec.skipped}", why, optional,
                        source=rec.label)
    data = rec.data if exp.from_recording is None else exp.from_recording(rec.data)
    return Evidence(exp.id, data, Mode.REPLAY, rec.label, why=why, provenance=rec.provenance)


def _missing(exp, message: str, why: str, optional: bool, source: str) -> Evidence:
    """The Evidence of a recording that is not there: an error, unless the experiment declares it optional there."""
    if not optional:
        raise ReferenceDataError(message)
    return Evidence(exp.id, None, Mode.REPLAY, source, why=why, missing=message)
