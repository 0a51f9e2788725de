"""CPU-time arithmetic and the ioctl trace parser (on ioctl lines captured on the H100)."""

from pathlib import Path

import pytest

from helpers.ch01_path_of_a_copy import cpu_time, ioctls
from helpers.core.errors import InputError, InputTypeError

DATA = Path(__file__).parent / "data"


def run(kind="pinned", direction="h2d", wall=0.1, user=0.05, sys=0.01):
    return {"host_kind": kind, "direction": direction, "nbytes": 1 << 30, "reps": 2, "wall": wall,
            "user": user, "sys": sys, "thread_user": user, "thread_sys": sys}


def test_per_gb_arithmetic():
    g = cpu_time.per_gb(run())
    gb = 2 * (1 << 30) / 1e9
    assert g["user_s_per_gb"] == pytest.approx(0.05 / gb)
    assert g["gbps"] == pytest.approx(gb / 0.1)
    assert g["cpu_share"] == pytest.approx(0.6)


@pytest.mark.parametrize("bad", [dict(wall=0.0), dict(wall=-1.0)])
def test_per_gb_rejects_impossible_runs(bad):
    with pytest.raises(ValueError):
        cpu_time.per_gb(run(**bad))


def test_lookup_and_rows():
    data = {"nbytes": 1 << 30, "scheds": [{"sched": "auto", "runs": [run(), run("pageable")]}]}
    assert cpu_time.lookup(data, "auto", "pageable", "h2d")["gbps"] > 0
    assert len(cpu_time.rows(data)) == 2 and len(cpu_time.rows(data)[0]) == len(cpu_time.HEADERS)
    with pytest.raises(KeyError):
        cpu_time.lookup(data, "blocking", "pinned", "h2d")


@pytest.mark.parametrize("kw, exc", [(dict(sched="sometimes"), InputError), (dict(nbytes=0), InputError),
                                     (dict(nbytes=1 << 40), InputError), (dict(reps=0), InputError),
                                     (dict(reps=True), InputTypeError)])
def test_measure_rejects_bad_input_before_running(kw, exc):
    with pytest.raises(exc):
        cpu_time.measure(**kw)


def test_ioctl_trace_parser_on_h100_lines():
    text = (DATA / "strace_h100_ioctls_n10.txt").read_text()
    data = ioctls.parse_trace(text)
    calls = [ln for ln in text.splitlines() if "ioctl(" in ln and "resumed>" not in ln]
    assert ioctls.phase_total(data, "start-up") == len(calls)
    assert data["markers"] == 0 and ioctls.phase_total(data, "during the loop") == 0


def test_ioctl_names_need_the_node():
    req = "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20)"
    assert ioctls.request_name("/dev/nvidiactl", req) == "NV_ESC_RM_CONTROL"
    assert ioctls.request_name("/dev/nvidia0", "_IOC(_IOC_READ|_IOC_WRITE, 0x46, 0xc9, 0x4)") == "NV_ESC_REGISTER_FD"
    assert ioctls.request_name("/dev/nvidia-uvm", "_IOC(_IOC_NONE, 0, 0x21, 0)") == "UVM_MAP_EXTERNAL_ALLOCATION"
    assert ioctls.request_name("/dev/nvidia-uvm", "0x30000001") == "UVM_INITIALIZE"
    assert ioctls.request_name("", req) == "type 0x46 nr 0x2a"  # without -y strace gives no path
    assert ioctls.request_name("/dev/null", "TCGETS") == "TCGETS"


def test_markers_split_the_phases():
    lines = ["1 ioctl(3</dev/nvidiactl>, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2b, 0x30), 0x7ffd) = 0",
             "1 getppid()                         = 7",
             "2 ioctl(3</dev/nvidiactl>, _IOC(_IOC_READ|_IOC_WRITE, 0x46, 0x2a, 0x20), 0x7ffd <unfinished ...>",
             "2 <... ioctl resumed>)              = 0",
             "1 getppid()                         = 7",
             "1 ioctl(5</dev/nvidia-uvm>, _IOC(_IOC_NONE, 0, 0x22, 0), 0x7ffd) = 0"]
    data = ioctls.parse_trace("\n".join(lines))
    assert data["markers"] == 2
    assert data["phases"]["start-up"] == [["/dev/nvidiactl", "NV_ESC_RM_ALLOC", 1]]
    assert data["phases"]["during the loop"] == [["/dev/nvidiactl", "NV_ESC_RM_CONTROL", 1]]
    assert data["phases"]["after the loop"] == [["/dev/nvidia-uvm", "UVM_FREE", 1]]


def test_h100_trace_with_paths_and_markers():
    """A real `strace -f -y -e trace=ioctl,getppid` of the census workload (N=10) on the H100.
    A helper process spawned at import also calls getppid: only the program's own count."""
    text = (DATA / "strace_h100_ioctl_y_n10.txt").read_text()
    data = ioctls.parse_trace(text)
    assert data["markers"] == 2
    assert sum(1 for ln in text.splitlines() if "getppid()" in ln) == 3
    calls = [ln for ln in text.splitlines() if "ioctl(" in ln and "resumed>" not in ln]
    assert sum(ioctls.phase_total(data, p) for p in data["phases"]) == len(calls)
    loop = data["phases"]["during the loop"]
    assert not [r for r in loop if r[0].startswith("/dev/nvidia")]
    names = {r[1] for r in data["phases"]["start-up"] if r[0] == "/dev/nvidiactl"}
    assert {"NV_ESC_RM_ALLOC", "NV_ESC_RM_CONTROL", "NV_ESC_RM_MAP_MEMORY"} <= names
    assert all(not n.startswith(("type ", "NV escape")) for n in names)  # every request was named


def test_from_data_reparses_raw_lines():
    raw = (DATA / "strace_h100_ioctl_y_n10.txt").read_text()
    stale = {"rounds": 10, "markers": 3, "phases": {"during the loop": [["x", "y", 5]]}, "raw": raw}
    fresh = ioctls.from_data(stale)
    assert fresh["markers"] == 2 and fresh["rounds"] == 10
    assert ioctls.phase_total(fresh, "during the loop") == 0
    assert ioctls.from_data({"phases": {}, "markers": 0}) == {"phases": {}, "markers": 0}


def test_loop_summary_is_computed():
    data = ioctls.parse_trace((DATA / "strace_h100_ioctl_y_n10.txt").read_text())
    assert "no ioctl at all" in ioctls.loop_summary(data)
    busy = dict(data, phases=dict(data["phases"], **{"during the loop": [["/dev/nvidiactl", "NV_ESC_RM_CONTROL", 7]]}))
    assert "received 7 ioctl calls" in ioctls.loop_summary(busy)
    assert "not found" in ioctls.loop_summary(dict(data, markers=1))
