"""Zero-copy and write-combined helpers without a GPU: the data pattern and its exact sums, the
Numba kernels on the CUDA simulator, and verdicts that follow from the numbers given."""


import numpy as np
import pytest
from conftest import run_on_simulator

from helpers.ch04_pinned_memory import memlock, write_combined, zero_copy
from helpers.ch04_pinned_memory.pinning import PinRequestError
from helpers.core.errors import InputError, InputTypeError
from helpers.core.evidence import Evidence
from helpers.core.mode import Mode


def test_pattern_and_expected_sums():
    a = np.empty(4 * zero_copy.TILE, dtype=np.float32)
    zero_copy.fill_pattern(a)
    assert zero_copy.expected(a.size, "stream", None) == float(a.astype(np.float64).sum())
    assert zero_copy.expected(a.size, "stream_x8", None) == 8 * float(a.astype(np.float64).sum())
    idx = zero_copy.indices(a.size, "gather_dense")
    assert idx.size == a.size // 16 and idx.min() >= 0 and idx.max() < a.size
    assert zero_copy.expected(a.size, "gather_dense", idx) == float(a[idx].astype(np.float64).sum())
    assert np.array_equal(idx, zero_copy.indices(a.size, "gather_dense"))  # seeded: reproducible


@pytest.mark.parametrize("n,err", [(0, InputError), (-4096, InputError), (4096 * 3 + 4, PinRequestError),
                                   (2.0, InputTypeError)])
def test_bad_buffer_sizes(n, err):
    with pytest.raises(err, match="zero-copy buffer"):
        zero_copy._elements(n)


def test_numba_kernels_on_the_simulator():
    """Both ways (mapped_array and a device copy) give the exact sums on Numba's simulator."""
    code = ("from helpers.ch04_pinned_memory import memlock, zero_copy as z; r = z.numba_check(); "
            "assert set(r) == set(z.PATTERNS), r; print('OK', r)")
    assert run_on_simulator(code).startswith("OK")


def test_numba_check_rejects_bad_sizes():
    with pytest.raises(PinRequestError, match="multiple of"):
        zero_copy.numba_check(1000)
    with pytest.raises(InputTypeError, match="n_elems"):
        zero_copy.numba_check(True)


def test_measure_without_gpu(no_gpu):
    from helpers.core.errors import NoGPUError

    with pytest.raises(NoGPUError):
        zero_copy.measure_cupy(1 << 20)


def _zc_data(zero_ms, copy_ms):
    rows = []
    for (fw, p, n), (z, c) in zip(
            [(fw, p, n) for n in (16 << 20, 1 << 30) for p in zero_copy.PATTERNS for fw in zero_copy.FRAMEWORKS],
            [(zero_ms[p], copy_ms[p]) for n in (0, 1) for p in zero_copy.PATTERNS for fw in (0, 1)], strict=True):
        rows.append({"framework": fw, "pattern": p, "nbytes": n, "zero_copy_s": z / 1e3, "copy_then_compute_s": c / 1e3})
    return {"rows": rows, "tie": 0.1}


def test_verdict_follows_the_numbers():
    zero = {"stream": 10, "stream_x8": 80, "gather_sparse": 1, "gather_dense": 10.5}
    copy = {"stream": 12, "stream_x8": 14, "gather_sparse": 11, "gather_dense": 10}
    data = _zc_data(zero, copy)
    summ = zero_copy.pattern_summary(data)
    assert summ["stream"]["wins"] == 4 and summ["stream_x8"]["loses"] == 4 and summ["gather_dense"]["ties"] == 4
    text = zero_copy.verdict(data)
    assert "single pass, in order: supported: zero-copy is faster (median speed-up 1.20x)" in text
    assert "sparse scattered access: supported" in text
    assert "dense scattered access: a draw" in text
    assert "data re-read by the kernel: refuted" in text
    flipped = zero_copy.verdict(_zc_data(copy, zero))
    assert "single pass, in order: refuted" in flipped and "sparse scattered access: refuted" in flipped
    assert "data re-read by the kernel: supported" in flipped
    assert zero_copy.median_speedup(data, "gather_sparse") == pytest.approx(11.0)


def test_zero_copy_figure_and_table():
    data = _zc_data({p: 1 for p in zero_copy.PATTERNS}, {p: 2 for p in zero_copy.PATTERNS})
    cd = Evidence("zero_copy.vs_copy", data, Mode.REPLAY, "stand-in", why="test")
    fig = zero_copy.figure(cd)
    assert len(fig.fig.data) == 2 and all(y == 2 for y in fig.fig.data[0].y)
    assert zero_copy.table_rows(data)[0][-2:] == ("2.00x", "wins")


# ---------------------------------------------------------------- write-combined

def test_cpu_read_of_ordinary_memory():
    a = np.ones(4 << 20, dtype=np.uint8)
    gbps, n = write_combined.cpu_read_gbps(a, budget_s=0.05)
    assert gbps > 0 and 4096 <= n <= a.size and n % 4096 == 0


@pytest.mark.parametrize("bad", [np.ones(100, np.uint8), np.ones(8192, np.float32), np.ones((64, 128), np.uint8)])
def test_cpu_read_bad_arrays(bad):
    with pytest.raises(ValueError):
        write_combined.cpu_read_gbps(bad)


def test_memory_type_hints(tmp_path):
    cpu = tmp_path / "cpuinfo"
    cpu.write_text("processor\t: 0\nflags\t\t: fpu pat sse2 hypervisor\n")
    par = tmp_path / "params"
    par.write_text("ResmanDebugLevel: 4294967295\nUsePageAttributeTable: 4294967295\n")
    h = write_combined.memory_type_hints(str(cpu), str(par))
    assert h == {"cpu_pat": True, "hypervisor": True, "nvidia_UsePageAttributeTable": "4294967295"}
    assert write_combined.memory_type_hints(str(tmp_path / "no"), str(tmp_path / "no"))["cpu_pat"] is None


def _wc(read_wc, h2d_wc):
    base = {"cpu_read_gbps": 10.0, "cpu_write_gbps": 10.0, "h2d_gbps": 50.0, "d2h_gbps": 50.0}
    wc = dict(base, cpu_read_gbps=read_wc, h2d_gbps=h2d_wc)
    return {"nbytes": 1 << 28, "rows": [dict(base, kind="default"), dict(wc, kind="write_combined")]}


def test_write_combined_verdicts():
    assert "CPU reads of write-combined memory are slow here" in write_combined.verdict(_wc(0.1, 50.0))
    assert "100x slower" in write_combined.verdict(_wc(0.1, 50.0))
    assert "at 0.60x the rate" in write_combined.verdict(_wc(0.1, 30.0))
    same = write_combined.verdict(_wc(9.0, 50.0))
    assert "not observed here" in same and "do not say why" in same
    assert "did not take effect" not in same  # the numbers cannot tell why: the verdict must not claim a cause
    assert "1.2x faster" in write_combined.verdict(_wc(12.0, 50.0))
    hinted = dict(_wc(9.0, 50.0), hints={"cpu_pat": True, "hypervisor": True, "nvidia_UsePageAttributeTable": None})
    assert "runs under a hypervisor: yes" in write_combined.verdict(hinted)
    fig = write_combined.figure(Evidence("pinning.write_combined", _wc(0.1, 50.0), Mode.REPLAY, "x", why="test"))
    assert fig.fig.layout.yaxis.type == "log" and len(fig.fig.data) == 2


def test_the_pat_option_and_ratios_are_named_not_raw():
    """Issue 38: 'UsePageAttributeTable: 4294967295' and '1.0x slower' are raw values."""
    hinted = dict(_wc(9.0, 50.0), hints={"cpu_pat": True, "hypervisor": True,
                                          "nvidia_UsePageAttributeTable": "4294967295"})
    text = write_combined.verdict(hinted)
    assert "4294967295" not in text.replace("~0", "") and "default logic" in text
    assert "set to 1" in write_combined._pat_option("1")
    assert write_combined._slower(0.99) == "about the same speed" and write_combined._slower(0.5) == "2.0x slower"


def test_memlock_is_shown_with_units():

    text = memlock.memlock_text({"soft": 64 << 20, "hard": None, "euid": 1000, "cap_ipc_lock": False})
    assert text == "RLIMIT_MEMLOCK soft 64 MiB, hard unlimited; effective uid 1000; CAP_IPC_LOCK no"
    assert "None" not in memlock.memlock_text(memlock.process_memlock())


class _FakePinned:
    """Stands in for PinnedAlloc (cudaHostAlloc) without a GPU: plain host memory, close() recorded."""

    made: list = []

    def __init__(self, nbytes, flags="default", *, fill=0):
        self.nbytes, self.flags, self.ptr = nbytes, flags, 1
        self.array = np.zeros(nbytes, dtype=np.uint8)
        _FakePinned.made.append(self)

    def close(self):
        self.ptr = self.array = None


def test_both_frameworks_share_one_buffer_and_its_indices_per_size(monkeypatch):
    """record_vs_copy makes one filled mapped buffer and one set of gather indices per size, hands the
    same inputs to CuPy and to Numba, and frees the buffer afterwards (pinned memory must not leak)."""
    _FakePinned.made = []
    seen = []
    monkeypatch.setattr(zero_copy, "PinnedAlloc", _FakePinned)
    monkeypatch.setattr(zero_copy, "_device_room", lambda n: None)
    for fw in zero_copy.FRAMEWORKS:
        monkeypatch.setattr(zero_copy, f"measure_{fw}",
                            lambda n, reps, inputs, fw=fw: seen.append((fw, n, inputs, inputs.host.ptr)) or [])
    zero_copy.record_vs_copy(quick=True)
    sizes = zero_copy.zero_copy_sizes(True)
    assert [(fw, n) for fw, n, _, _ in seen] == [(fw, n) for n in sizes for fw in zero_copy.FRAMEWORKS]
    assert len(_FakePinned.made) == len(sizes)
    for k, n in enumerate(sizes):
        (_, _, a, open_a), (_, _, b, open_b) = seen[2 * k:2 * k + 2]
        assert a is b and open_a is not None and open_b is not None  # the same, open buffer for both
        assert a.host.nbytes == n and a.host.flags == "mapped"
        data = a.host.array  # closed now: the fake drops its array on close
        assert data is None and a.host.ptr is None
        assert set(a.idx) == set(zero_copy.FRACTION)
        assert np.array_equal(a.idx["gather_dense"], zero_copy.indices(n // 4, "gather_dense"))


def test_shared_inputs_must_fit_the_size_and_patterns(monkeypatch):
    monkeypatch.setattr(zero_copy, "PinnedAlloc", _FakePinned)
    ins = zero_copy.make_inputs(1 << 20)
    assert np.array_equal(ins.host.array.view(np.float32)[:3], [0, 1, 2])  # filled by fill_pattern
    with pytest.raises(PinRequestError, match="do not fit"), zero_copy._inputs(2 << 20, zero_copy.PATTERNS, ins):
        pass
    with pytest.raises(PinRequestError, match="gather_sparse"), zero_copy._inputs(
            1 << 20, zero_copy.PATTERNS, zero_copy.Inputs(ins.host, {})):
        pass
    with zero_copy._inputs(1 << 20, zero_copy.PATTERNS, None) as own:
        assert own is not ins and own.host.ptr is not None
    assert own.host.ptr is None  # inputs made inside are freed on leaving
    assert ins.host.ptr is not None  # the caller's are left open
