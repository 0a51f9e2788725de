"""Chapter 6's exercises, diagrams and views: expected values follow the models and the
recording, checks catch planted wrong answers, bad input is refused."""

import os
import sys

import pytest

from helpers.ch06_gem_ttm_dmabuf import cuda_dmabuf, diagrams, exercises, vram_alloc
from helpers.core import experiments
from helpers.core.errors import InputError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode


def test_buddy_blocks_follow_the_kernel_highest_offset_and_right_descent():
    assert exercises.buddy_blocks(16, 3) == [(14, 1), (13, 0)]
    assert exercises.buddy_blocks(16, 16) == [(0, 4)]


def test_exercise_61_accepts_the_kernels_blocks_and_explains_the_lowest_offset_slip(capsys):
    assert exercises.ex61_buddy([(14, 1), (13, 0)]) is True
    assert exercises.ex61_buddy([(0, 1), (2, 0)]) is False
    assert "highest-offset" in capsys.readouterr().out
    assert exercises.ex61_buddy(None) is None


def test_exercise_62_and_63_expected_values():
    assert exercises.eviction_victim() == ("a", "GTT")
    assert exercises.ex62_eviction("a", "gtt") is True and exercises.ex62_eviction("a", "SYSTEM") is False
    assert exercises.fragmentation_after() == pytest.approx(1 - 8 / 15)
    assert exercises.ex63_fragmentation(0.4667) is True and exercises.ex63_fragmentation(0.5) is False


def test_exercise_64_explains_every_option(capsys):
    assert exercises.ex64_what_the_fd_is("a") is True
    assert exercises.ex64_what_the_fd_is("b") is False
    assert "ENOTSUPP" in capsys.readouterr().out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the trial needs memfd and /proc (Linux)")
def test_describe_fd_trial_catches_planted_mistakes():
    def right(fd):
        return {"size": os.lseek(fd, 0, os.SEEK_END), "link": os.readlink(f"/proc/self/fd/{fd}")}

    def wrong_size(fd):
        return {"size": os.fstat(fd).st_blocks, "link": os.readlink(f"/proc/self/fd/{fd}")}

    def closes(fd):
        out = right(fd)
        os.close(fd)
        return out

    assert exercises._describe_trial(right) == []
    assert any("size" in p for p in exercises._describe_trial(wrong_size))
    assert any("closed" in p for p in exercises._describe_trial(closes))
    assert exercises.ex65_describe_fd(right) is True


def test_diagrams_have_titles_descriptions_and_all_boxes():
    for d in (diagrams.sharing_diagram(), diagrams.ttm_diagram()):
        svg = d.svg()
        assert "<title" in svg and "<desc" in svg and d.description
    assert "dma-buf" in diagrams.sharing_diagram().svg() and "GTT placement" in diagrams.ttm_diagram().svg()


def test_export_dmabuf_is_the_experiments_shown_code():
    exp = experiments.discover()["dmabuf.cuda_export"]
    assert exp.shown is cuda_dmabuf.export_dmabuf
    assert experiments.discover()["vram.alloc_granularity"].shown is vram_alloc.vram_taken


def test_look_at_fd_on_a_plain_file(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"\x5a" * 8192)
    fd = os.open(p, os.O_RDONLY)
    try:
        r = cuda_dmabuf.look_at_fd(fd, 8192, 0x5A)
    finally:
        os.close(fd)
    assert r["lseek_end"] == 8192 and r["mmap"] == {"ok": True, "matches_fill": True}
    assert r["proc_fd_link"].endswith("/f")


def test_export_bad_sizes_are_refused_first():
    with pytest.raises(InputError):
        cuda_dmabuf.export_device_memory(4097)


def fake_granularity() -> dict:
    runs = []
    for n, taken in ((1, 2 << 20), (4096, 2 << 20), (3 << 20, 32 << 20)):
        for extra in (0, 0, 2 << 20):
            runs.append({"nbytes": n, "count": 8, "taken_bytes": taken + extra,
                         "ptrs": [0x7000_0000 + i * max(512, n) for i in range(8)]})
    return {"runs": runs}


def test_granularity_summary_and_rows():
    s = vram_alloc.summary(fake_granularity())
    assert s[0]["nbytes"] == 1 and s[0]["taken_per_alloc"] == (2 << 20) / 8 and s[0]["min_gap"] == 512
    assert s[2]["taken_per_alloc"] == 4 << 20 and s[2]["spread"] == (2 << 20) / 8
    ev = Evidence("vram.alloc_granularity", fake_granularity(), Mode.REPLAY, "a test recording", why="a test")
    rows = vram_alloc.rows(ev)
    assert rows[0] == ("1 B", "256 KiB", "256 KiB", "512 B") and rows[2][1] == "4 MiB"


def test_granularity_without_a_recording_is_empty():
    ev = Evidence("vram.alloc_granularity", None, Mode.REPLAY, "none", why="no recording", missing="pending")
    assert vram_alloc.rows(ev) == []


def test_exercise_66_implicit_sync_explains_every_option(capsys):
    assert exercises.ex66_implicit_sync(None) is None
    assert exercises.ex66_implicit_sync("b") is True
    assert "dma_resv" in capsys.readouterr().out
    for wrong in "acd":
        assert exercises.ex66_implicit_sync(wrong) is False
    assert set(exercises.SYNC_WHY) == set(exercises.SYNC_OPTIONS)
