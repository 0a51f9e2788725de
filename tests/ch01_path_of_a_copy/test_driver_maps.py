"""The driver's mappings: /proc/PID/maps parsed and classified, on maps lines captured from a
CUDA process on the course's H100 (driver 580.159.04) and on this process's own maps."""

from pathlib import Path

import pytest

from helpers.ch01_path_of_a_copy import driver_maps as dm

DATA = Path(__file__).parent / "data"


def h100(name: str) -> list[str]:
    return (DATA / f"maps_h100_{name}.txt").read_text().splitlines()


def test_every_line_of_a_real_maps_file_parses():
    text = Path("/proc/self/maps").read_text()
    maps = dm.parse(text)
    assert len(maps) == len([ln for ln in text.splitlines() if ln.strip()])
    assert all(m.end > m.start and len(m.perms) == 4 for m in maps)
    assert any(m.path == "[stack]" for m in maps)
    assert all(m.role == "" for m in maps if not m.path.startswith("/dev/nvidia"))


@pytest.mark.parametrize("path,role", [("/dev/nvidiactl", "control"), ("/dev/nvidia0", "device"),
                                       ("/dev/nvidia12", "device"), ("/dev/nvidia-uvm", "uvm"),
                                       ("/dev/nvidia-uvm-tools", "other"), ("/dev/nvidia-modeset", "other"),
                                       ("/dev/nvidiactl (deleted)", "control"), ("/dev/null", ""),
                                       ("/usr/lib/libcuda.so.1", ""), ("", "")])
def test_classify(path, role):
    assert dm.classify(path) == role


def test_h100_mappings_after_cuda_start_up():
    maps = dm.nvidia_mappings(h100("after_init"))
    assert len(maps) == len(h100("after_init"))  # the capture holds only /dev/nvidia* lines
    s = dm.summary(maps)
    assert set(s) == {"control", "device", "uvm"}
    assert sum(v["count"] for v in s.values()) == len(maps)
    assert sum(v["bytes"] for v in s.values()) == sum(m.size for m in maps)
    assert all(m.shared for m in maps)  # every driver mapping is MAP_SHARED
    assert all(m.offset == 0 for m in maps if m.role in ("control", "device"))


def test_h100_doorbell_sized_write_only_windows_are_flagged():
    doorbells = [m for m in dm.nvidia_mappings(h100("after_init")) if "doorbell" in m.hint]
    assert doorbells and all(m.size == dm.USERMODE_BYTES and m.role == "device" for m in doorbells)
    assert all(m.perms == "-w-s" for m in doorbells)  # the capture shows them write-only


def test_h100_managed_allocation_is_a_uvm_mapping_at_offset_equal_address():
    new = dm.new_mappings(h100("after_init"), h100("after_managed"))
    assert len(new) == 1
    (m,) = new
    assert m.role == "uvm" and m.size == 64 << 20 and m.offset == m.start
    assert "offset == address" in m.hint


def test_rows_and_stage_rows():
    rows = dm.mapping_rows(h100("after_init"))
    assert len(rows) == len(h100("after_init")) and all(len(r) == 6 for r in rows)
    stages = [{"stage": "before", "lines": []}, {"stage": "after", "lines": h100("after_init")}]
    st = dm.stage_rows(stages)
    assert st[0] == ("before", "(none)", 0, "0 B")
    assert {r[1] for r in st[1:]} == {dm.ROLES[k][0] for k in ("control", "device", "uvm")}


@pytest.mark.parametrize("bad", ["hello", "7f00-7e00 rw-p 00000000 00:00 0", "zz-10 rw-p 0 00:00 0 x",
                                 "1000-2000 rwzp 00000000 00:00 0"])
def test_bad_lines_are_rejected(bad):
    with pytest.raises(dm.MapsFormatError):
        dm.parse_line(bad)


def test_offset_nonzero_on_device_node_is_flagged():
    m = dm.parse_line("7f0000000000-7f0000001000 rw-s 00001000 00:06 143  /dev/nvidia0")
    assert "refuse" in m.hint


def test_record_checks_its_size():
    with pytest.raises(ValueError):
        dm.record(-1)
    with pytest.raises(ValueError):
        dm.record(1 << 40)
