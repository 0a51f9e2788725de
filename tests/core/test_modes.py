"""Mode detection: live only with a usable GPU, replay forced by COURSE_MODE, loud failures."""

import pytest

from helpers.core import gpu, mode
from helpers.core.errors import NoGPUError


def test_no_gpu_means_replay(no_gpu):
    info = mode.detect()
    assert info.mode is mode.Mode.REPLAY and "hidden by the test" in info.reason


def test_forced_replay_does_not_probe(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "replay")
    monkeypatch.setattr(gpu, "probe", lambda: pytest.fail("replay must not touch the GPU"))
    assert mode.current() is mode.Mode.REPLAY


def test_live_demanded_without_gpu(no_gpu, monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "live")
    with pytest.raises(NoGPUError, match="COURSE_MODE=live"):
        mode.detect()


def test_live_with_gpu(monkeypatch):
    monkeypatch.delenv("COURSE_MODE", raising=False)
    monkeypatch.setattr(gpu, "probe", lambda: gpu.GPUProbe(True, "Fake GPU", device_count=1, name="Fake GPU"))
    assert mode.is_live()


@pytest.mark.parametrize("bad", ["LIVEE", "sim", "1"])
def test_unknown_mode_rejected(monkeypatch, bad):
    monkeypatch.setenv("COURSE_MODE", bad)
    with pytest.raises(ValueError, match="COURSE_MODE"):
        mode.requested()


def test_banner_says_replay_and_reference(no_gpu):
    info = mode.detect()
    text = mode.banner(info, "Chapter X", reference_name="h100-pcie")
    assert "Chapter X" in text and "REPLAY" in text and "no GPU" in text
    assert "h100-pcie" in text
    assert "expected mode on a machine without an NVIDIA GPU" in text
    assert text.index("expected mode") < text.index("why       : no usable GPU (hidden by the test)")


def test_banner_is_a_formatter(no_gpu, monkeypatch):
    """Formatting the banner changes no state: the simulator switch is course.start's."""
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    mode.banner(mode.detect(), "Chapter X")
    assert "NUMBA_ENABLE_CUDASIM" not in __import__("os").environ


def test_forced_replay_banner_does_not_call_it_expected(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "replay")
    text = mode.banner(mode.detect(), "Chapter X")
    assert "COURSE_MODE=replay" in text and "expected mode" not in text


def test_cupy_without_gpu_explains(no_gpu):
    with pytest.raises(NoGPUError, match="hidden by the test"):
        gpu.cupy()
