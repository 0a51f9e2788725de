"""Lab 6 without QEMU: hidden inputs, taking the learner's code out of a namespace, reading a
run cut short. The driver itself is checked in the VM (tests/labs/test_lab6_live.py)."""

from __future__ import annotations

import random

import pytest

from helpers.core.errors import InputError
from helpers.labs import lab6
from helpers.measure import kernel_vm
from helpers.measure.kernel_vm import qemu
from instructor.labs import lab6 as ref


def test_hidden_inputs_follow_the_seed_and_differ_from_the_examples():
    for part in lab6.PARTS:
        assert ref.cases(part, 5) == ref.cases(part, 5)
        assert ref.cases(part, 5) != ref.cases(part, 6)
        assert ref.cases(part, 5) != lab6.examples(part)


def test_inputs_stay_where_edu_and_the_checks_can_use_them():
    for k in range(200):
        rng = random.Random(k)
        d = lab6.inputs("dma", rng)
        assert all(0 <= o and o + d["count"] <= d["size"] for o in d["offsets"]) and d["count"] < 4096
        assert d["iova"] % lab6.PAGE == 0 and d["iova"] + d["size"] < 1 << 28  # below edu's DMA mask
        r = lab6.inputs("refuse", rng)
        assert r["offset"] + r["count"] <= r["size"] and not r["iova"] <= r["unmapped"] < r["iova"] + r["size"]
        f = lab6.inputs("factorial", rng)
        assert all(0 <= n <= 12 and s != n for n, s in zip(f["n"], f["sentinels"], strict=True))
    with pytest.raises(InputError, match="no part"):
        lab6.inputs("bogus", random.Random(0))


def test_code_of_takes_the_driver_and_its_helpers_as_source_or_compiled_code():
    ns: dict = {}
    exec(compile("def _twice(x):\n    return 2 * x\n\ndef factorial(dev, n):\n    return _twice(n)\n",
                 "<cell factorial>", "exec"), ns)
    code = lab6.code_of(ns)
    assert set(code) == {"factorial", "_twice"}  # no source kept: the grader's worker compiles cells like this
    assert "marshal" in code["factorial"]

    def identify(dev):
        return 1

    code = lab6.code_of({"identify": identify})
    assert code["identify"]["source"].startswith("def identify(dev):")
    with pytest.raises(InputError, match="must be a function"):
        lab6.code_of({"factorial": 3})


def test_a_run_cut_short_keeps_finished_parts_and_says_why_the_rest_failed(monkeypatch):
    text = (f"{qemu.BEGIN}\n" + '{"start": true}\n{"part": "open", "ok": true, "feedback": ""}\n'
            '{"part": "identify", "ok": false, "feedback": "x"}\n{"part": "fac')
    parsed = lab6.parse_stream(text)
    assert [r.get("part") for r in parsed["rows"]] == [None, "open", "identify"] and not parsed["complete"]

    def fake_run(machine, params, *, main, files, timeout_s, parse):
        assert machine == "edu" and b"lab6_harness" in main and b'"factorial"' in files["plan.json"]
        return {"result": parse(text), "vm": {"device_abort": "QEMU's emulated device stopped the VM (EDU: DMA range)"}}

    monkeypatch.setattr(kernel_vm, "run", fake_run)
    lab6._CACHE.clear()
    out = lab6.run({p: lab6.examples(p) for p in ("open", "identify", "factorial")}, {})["parts"]
    assert out["open"]["ok"] and not out["identify"]["ok"]
    assert not out["factorial"]["ok"] and "EDU: DMA range" in out["factorial"]["feedback"]
    lab6._CACHE.clear()


def test_the_reference_ships_every_driver_function():
    code = ref.reference_code()
    assert set(lab6.DRIVER_FUNCTIONS) <= set(code)
    assert all("source" in e for e in code.values())
