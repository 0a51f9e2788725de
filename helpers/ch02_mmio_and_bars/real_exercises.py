"""The exercises of Chapter 2, part 2 (QEMU's edu device): expected values come from the recorded
or live transcript (real_bar), never from the page."""

from __future__ import annotations

import random

from helpers.ch02_mmio_and_bars import real_bar
from helpers.core.evidence import Evidence
from helpers.learning import checks


def liveness_answer(answer, ev: Evidence) -> bool | None:
    """Prediction: what reading 0x04 returns after writing 0x12345678."""
    row = next(r for r in ev.require()["liveness"]["rows"] if r["wrote"] == 0x12345678)
    return checks.equal("liveness read-back", answer, row["read"],
                        "edu does not store what you write to 0x04 as it is", why="edu_mmio_write stores ~val in "
                        "addr4: a read-back proves a live device answered, not memory that kept a value")


def factorial13_answer(answer, ev: Evidence) -> bool | None:
    """Derivation: what edu's 32-bit factorial register holds after computing 13!."""
    got = real_bar.facts(ev)["factorials"].get(13)
    if got is None:
        return checks.verdict("13! in 32 bits", None, "this recording has no n = 13")
    return checks.equal("13! in 32 bits", answer, got, "13! = 6 227 020 800 needs 33 bits; keep what fits",
                        why="the device multiplies in a uint32_t: the result is 13! mod 2^32")


def decode_bar_trial(fn, ev: Evidence) -> list[str]:
    """Run a learner's decode_bar(raw) on the recorded BARs and on drawn ones, each decoded by the
    course only after the learner's answer (checks.learner_first); the problems found."""
    def judge(raw: int, got) -> list[str]:
        return [] if tuple(got) == _decode(raw) else [f"decode_bar({raw:#010x}) gave {tuple(got)}, expected a "
                                                      "different answer"]

    return checks.learner_first(_bar_cases(ev), fn, judge)


def _bar_cases(ev: Evidence) -> list[int]:
    """The recorded BARs' raw values, then drawn memory and I/O BARs."""
    cases = [b["raw"] for b in ev.require()["config"]["bars"]]
    rng = random.Random(2)
    for _ in range(20):
        base = rng.randrange(0, 1 << 20) << 12
        cases.append(base | rng.choice([0, 8]) | rng.choice([0, 4]))
        cases.append((rng.randrange(0, 1 << 14) << 2) | 1)
    return cases


def _decode(raw: int) -> tuple[str, int, bool]:
    if raw & 1:
        return ("io", 32, False)
    return ("memory", 64 if (raw >> 1) & 3 == 2 else 32, bool(raw & 8))


def decode_bar_answer(fn, ev: Evidence) -> bool | None:
    """Coding: decode a BAR register's low bits."""
    return checks.code("decode a BAR register", fn, lambda f: decode_bar_trial(f, ev),
                       why="bit 0 tells I/O from memory; for memory, bits 2-1 give the width (10b: 64-bit) "
                           "and bit 3 prefetchable")
