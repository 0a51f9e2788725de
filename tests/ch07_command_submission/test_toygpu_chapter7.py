"""Chapter 7's helpers (helpers.ch07_command_submission.toy_ring): batching, indirect buffers, ring dumps."""

from __future__ import annotations

import pytest
from toygpu_util import start_device

from helpers.ch07_command_submission import toy_ring
from helpers.core.mode import Mode
from helpers.models.toygpu import commands


@pytest.fixture(scope="module")
def gpu():
    dev = start_device()
    yield dev
    dev.close()


def test_batching_counts_doorbells_and_is_deterministic(gpu):
    one = toy_ring.batching(gpu, 64, 1)
    many = toy_ring.batching(gpu, 64, 16)
    assert one["doorbells"] == 64 and many["doorbells"] == 4
    assert many["cpu_us_per_command"] < one["cpu_us_per_command"] / 2
    with start_device() as g2:
        again = [toy_ring.batching(g2, 64, 1), toy_ring.batching(g2, 64, 16)]
    assert again == [one, many], "same seed, same commands: same counts and modelled times"
    assert toy_ring.batching_figure([one, many], 1).modes == [Mode.SIMULATED]
    with pytest.raises(ValueError, match="batch"):
        toy_ring.batching(gpu, 10, gpu.ring_entries)


def test_indirect_demo_uses_two_ring_entries(gpu):
    r = toy_ring.indirect_demo(gpu, 100)
    assert r == {"commands": 100, "ring_entries_used": 2, "doorbells": 1, "ok": True}


def test_ring_rows_decode_what_was_written(gpu):
    gpu.run([commands.nop()])
    rows = toy_ring.ring_rows(gpu, 2)
    assert rows[-2][2] == "NOP" and rows[-1][2].startswith("FENCE") and rows[-1][3] == "consumed"


def test_read_pointer_from_memory_saves_one_mmio_read_per_submit(gpu):
    mmio, memory = toy_ring.read_pointer_costs(gpu, 64, 4)
    assert (mmio["read_pointer"], memory["read_pointer"]) == ("mmio", "memory")
    assert mmio["doorbells"] == memory["doorbells"] == 16
    assert mmio["mmio_reads"] == 16 and memory["mmio_reads"] == 0
    assert memory["cpu_model_us"] < mmio["cpu_model_us"]
    assert gpu.read_pointer == "memory", "the comparison puts the driver back as it found it"
    rows = toy_ring.read_pointer_rows([mmio, memory])
    assert rows[0][0].startswith("RING_HEAD") and rows[1][2] == "0"
