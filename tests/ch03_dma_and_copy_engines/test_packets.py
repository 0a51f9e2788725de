"""Chapter 3b's packet-efficiency model and Exercise 3.8 (issue 28 X5): numbers against values worked
out by hand from the stated assumptions, the verdict's two branches, the exercise's hints, bad input."""

import pytest

from helpers.ch03_dma_and_copy_engines import exercises, packets
from helpers.core import reference
from helpers.core.errors import InputError, InputTypeError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode

# By hand: 32 GT/s x 16 lanes = 512 Gb/s; x 128/130 = 504.12 Gb/s = 63.015 GB/s of symbols.
SYMBOLS_GBPS = 63.0154
# Posted writes of 256 B cost 256 + 24 B: 63.0154 x 256 / 280 = 57.614 GB/s.
CEILING_256 = 57.614


def _limits(mps=256, mrrs=4096):
    return {"gpu": {"address": "0000:00:06.0", "mps": mps, "mps_supported": mps, "mrrs": mrrs,
                    "source": "config space"}, "upstream": None}


def _bidir(h2d, d2h):
    return {"h2d": {"median_gbps": h2d}, "d2h": {"median_gbps": d2h}}


def test_link_and_ceiling_match_the_hand_worked_numbers():
    assert packets.symbol_gbps() == pytest.approx(SYMBOLS_GBPS, rel=1e-4)
    assert packets.ceiling_gbps(256) == pytest.approx(CEILING_256, rel=1e-4)
    assert packets.ceiling_gbps(64, packets.COMPLETION_OVERHEAD_B) == pytest.approx(63.0154 * 64 / 84, rel=1e-4)
    assert packets.ceiling_gbps(128) < packets.ceiling_gbps(256) < packets.ceiling_gbps(4096) < packets.symbol_gbps()
    assert packets.symbol_gbps(16.0) == pytest.approx(SYMBOLS_GBPS / 2, rel=1e-4)  # Gen4 carries half


@pytest.mark.parametrize("payload, exc", [(0, InputError), (-256, InputError), (float("inf"), InputError),
                                          (True, InputTypeError), ("256", InputTypeError), (None, InputTypeError)])
def test_bad_payloads_are_refused(payload, exc):
    with pytest.raises(exc, match="payload"):
        packets.ceiling_gbps(payload)


def test_verdict_compares_the_recording_with_the_ceiling():
    text = packets.efficiency_verdict(_limits(), _bidir(h2d=55.0, d2h=55.0))
    assert "57.6 GB/s" in text and "95.5%" in text and "larger" in text and "inference" in text
    low = packets.efficiency_verdict(_limits(), _bidir(h2d=40.0, d2h=50.0))
    assert "cannot tell" in low and "larger" not in low
    assert "no recorded MPS" in packets.efficiency_verdict({"gpu": {"mps": None}}, _bidir(50.0, 50.0))


def test_exercise_3_8_on_the_reference_recording(capsys):
    limits = reference.load("h100-pcie").experiment("copy_engines.pcie_limits")
    assert packets.recorded_mps(limits) == 256, "the hand-worked CEILING_256 assumes the recorded MPS"
    ev = Evidence("copy_engines.pcie_limits", limits, Mode.REPLAY, "ref", why="t")
    assert exercises.ex_3_8_tlp_ceiling(57.6, ev) is True
    assert exercises.ex_3_8_tlp_ceiling(SYMBOLS_GBPS, ev) is False  # no packet overhead
    assert "24 bytes" in capsys.readouterr().out
    assert exercises.ex_3_8_tlp_ceiling(64 * 256 / 280, ev) is False  # no 128b/130b
    assert "128b/130b" in capsys.readouterr().out
    assert exercises.ex_3_8_tlp_ceiling(SYMBOLS_GBPS * 4096 / 4120, ev) is False  # MRRS taken as the payload
    assert "MRRS" in capsys.readouterr().out
    assert exercises.ex_3_8_tlp_ceiling(None, ev) is None


def test_exercise_3_8_says_when_the_recording_is_pending(capsys):
    assert exercises.ex_3_8_tlp_ceiling(57.6, Evidence("copy_engines.pcie_limits", None, Mode.REPLAY, "ref",
                                                       why="t")) is None
    assert "pending" in capsys.readouterr().out
