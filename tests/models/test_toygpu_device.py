"""Each toy-GPU command, each error path, completion and its timeouts."""

from __future__ import annotations

import numpy as np
import pytest
from toygpu_util import start_device

from helpers.core.errors import DeviceTimeoutError
from helpers.models.toygpu import commands as C
from helpers.models.toygpu import errors
from helpers.models.toygpu import regs as R
from helpers.models.toygpu.driver import ToyGPU

E = R.ErrorCode


def expect(gpu: ToyGPU, cmds, cls, code: E, info: int | None = None):
    """Run cmds; assert the device refuses them with `code` (and `info`) and stays usable."""
    with pytest.raises(cls) as err:
        gpu.run(cmds, timeout=2.0)
    assert err.value.code is code, str(err.value)
    if info is not None:
        assert err.value.info == info
    assert gpu.read("STATUS") & R.Status.ERROR
    gpu.recover()
    gpu.run([C.nop()], timeout=2.0)  # the device works again after recovery
    return err.value


# -- commands -------------------------------------------------------------------------------
def test_upload_download_roundtrip(gpu):
    data = np.random.default_rng(0).integers(0, 256, 3 * 4096 + 72, dtype=np.uint8)
    dva = gpu.alloc_vram(data.size)
    gpu.upload(data, dva)
    assert np.array_equal(gpu.download(dva, data.size), data)
    # the physical pages behind contiguous DVAs are scattered, and the bytes sit where the PTEs say
    phys = [gpu.translate(dva + k * 4096) for k in range(4)]
    assert any(b - a != 4096 for a, b in zip(phys, phys[1:], strict=False)), "pages should be scattered"
    assert np.array_equal(gpu.vram_view[phys[1]:phys[1] + 4096], data[4096:8192])


def test_scatter_gather_dma_both_directions(gpu):
    dva = gpu.alloc_vram(8192)
    src = gpu.alloc_sys(4096)
    src.view[:] = np.arange(4096) % 251
    # gather three pieces of system memory into one VRAM range, in a different order
    gpu.dma([(src.addr + 2048, dva, 1024), (src.addr, dva + 1024, 2048), (src.addr + 3072, dva + 3072, 1024)])
    expect_vram = np.concatenate([src.view[2048:3072], src.view[:2048], src.view[3072:]])
    assert np.array_equal(gpu.download(dva, 4096), expect_vram)
    dst = gpu.alloc_sys(4096)
    gpu.dma([(dst.addr + 3072, dva, 1024), (dst.addr, dva + 1024, 3072)], to_host=True)
    assert np.array_equal(dst.view, np.concatenate([expect_vram[1024:], expect_vram[:1024]]))
    c = gpu.device_counters()
    assert c["CNT_BYTES_D2H"] >= 4096 and c["CNT_DESCRIPTORS"] >= 5
    gpu.free_sys(src)
    gpu.free_sys(dst)


def test_fill_and_saxpy(gpu):
    x, y = gpu.alloc_vram(4096), gpu.alloc_vram(4096)
    gpu.upload(np.arange(1024, dtype=np.float32), x)
    gpu.run([C.fill(y, 4096, np.float32(1.5).view(np.uint32).item()), C.saxpy(x, y, 1024, -2.0)])
    out = gpu.download(y, 4096).view(np.float32)
    assert np.array_equal(out, np.float32(-2.0) * np.arange(1024, dtype=np.float32) + np.float32(1.5))
    gpu.run([C.fill(x + 4, 8, 0xDEADBEEF)])
    assert list(gpu.download(x, 16).view("<u4")) == [0, 0xDEADBEEF, 0xDEADBEEF, 0x40400000]


def test_fence_interrupt_and_counters(gpu):
    slot = gpu.alloc_sys(64)
    before = gpu.device_counters()
    gpu.run([C.fence(slot.addr + 8, 0xABCDEF), C.interrupt(), C.nop()])
    assert int(slot.view[8:16].view("<u8")[0]) == 0xABCDEF
    assert gpu.read("INT_STATUS") & R.Irq.USER
    gpu.write("INT_ACK", R.Irq.USER)
    assert not gpu.read("INT_STATUS") & R.Irq.USER
    after = gpu.device_counters()
    assert after["CNT_COMMANDS"] - before["CNT_COMMANDS"] == 4  # three + the driver's fence
    assert after["CNT_DOORBELLS"] - before["CNT_DOORBELLS"] == 1
    assert gpu.read("LAST_FENCE") == gpu.fence_value()
    gpu.free_sys(slot)


def test_indirect_buffers_nest_two_deep(gpu):
    dva = gpu.alloc_vram(4096)
    inner, outer = gpu.alloc_sys(4 * 64, align=64), gpu.alloc_sys(2 * 64, align=64)
    n_inner = gpu.write_commands(inner, [C.fill(dva, 16, 5), C.fill(dva + 16, 16, 6)])
    n_outer = gpu.write_commands(outer, [C.indirect(inner.addr, n_inner), C.fill(dva + 32, 8, 7)])
    gpu.run([C.indirect(outer.addr, n_outer)])
    assert list(gpu.download(dva, 40).view("<u4")) == [5] * 4 + [6] * 4 + [7] * 2
    too_deep = gpu.alloc_sys(64, align=64)
    gpu.write_commands(too_deep, [C.indirect(outer.addr, n_outer)])
    expect(gpu, [C.indirect(too_deep.addr, 1)], errors.CommandError, E.IB_DEPTH)
    for b in (inner, outer, too_deep):
        gpu.free_sys(b)


def test_modelled_time_is_deterministic_under_a_seed():
    def trace(seed):
        # polling the fence in memory only: the driver's bus traffic then does not depend on
        # when the OS delivers the device's interrupt notifications (as 'irq' waits would)
        with start_device(seed=seed) as g:
            d = g.alloc_vram(8192)
            stage, table = g.alloc_sys(8192, align=8), g.alloc_sys(C.DESC_BYTES, align=C.DESC_BYTES)
            stage.view[:] = 1
            table.view[:] = C.descriptors([(stage.addr, d, 8192)]).astype("<u8").view(np.uint8)
            g.run([C.dma(table.addr, 1), C.fill(d, 4096, 1), C.saxpy(d, d, 512, 1.0)], how="poll")
            g.bar1_read(0, 4096)
            return g.read("MODEL_TIME_NS"), g.counters.cpu_model_ns

    a, b, c = trace(3), trace(3), trace(4)
    assert a == b
    assert a != c


# -- waiting ----------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["irq", "poll", "register"])
def test_wait_modes(gpu, how):
    reads = gpu.counters.mmio_reads
    v = gpu.submit([C.nop()] * 4)
    gpu.wait(v, how=how, timeout=2.0)
    assert gpu.fence_value() >= v
    if how == "poll":
        assert gpu.counters.mmio_reads - reads == 0  # the hot path: write-backs in memory, no MMIO reads


def test_the_device_writes_its_read_pointer_back(gpu):
    before = gpu.read("RING_HEAD")
    for _ in range(3):  # more entries than the ring holds: the driver learns the head from memory
        v = gpu.submit([C.nop()] * (gpu.ring_entries // 2), interrupt=False)
        gpu.wait(v, how="poll")
    head = int(gpu.rptr_slot.view.view("<u8")[0])
    assert head == gpu.read("RING_HEAD") == before + 3 * (gpu.ring_entries // 2 + 1) == gpu.wptr
    assert gpu.head() == head


def test_a_polling_wait_sees_the_written_back_error_code(gpu):
    assert gpu.error_code() == 0
    v = gpu.submit([C.fill(0, 8, 0)], interrupt=False)  # DVA 0 is never mapped
    with pytest.raises(errors.MemoryFaultError, match="MMU_FAULT"):
        gpu.wait(v, how="poll", timeout=3.0)
    assert gpu.error_code() == E.MMU_FAULT
    gpu.clear_error()
    gpu.wait(v, how="poll", timeout=3.0)
    assert gpu.error_code() == 0


def test_bad_read_pointer_address(gpu):
    for bad in (gpu.rptr_slot.addr + 4, len(gpu.sys_view) - 8):
        gpu.write("CONTROL", 0)
        gpu.write("RPTR_ADDR", bad)
        with pytest.raises(errors.RingError, match="RING_CONFIG"):
            gpu.write("CONTROL", R.Control.RING_ENABLE)
        assert gpu.read("ERROR_INFO") == bad
        gpu.recover()


def test_wait_times_out_instead_of_hanging(gpu):
    # the fence is never reached: returning at all, with this error, is what proves there is no hang
    with pytest.raises(DeviceTimeoutError, match="not reached within 0.2 s"):
        gpu.wait(gpu.fence_value() + 100, timeout=0.2)


def test_masked_error_still_surfaces_at_timeout(gpu):
    gpu.write("INT_MASK", 0)
    with pytest.raises(errors.MemoryFaultError):
        gpu.run([C.fill(0, 8, 0)], timeout=0.3)


def test_clear_error_resumes_after_the_failed_command(gpu):
    d = gpu.alloc_vram(4096)
    v = gpu.submit([C.fill(d, 8, 1), C.fill(3, 8, 2), C.fill(d + 8, 8, 3)])
    with pytest.raises(errors.CommandError, match="MISALIGNED"):
        gpu.wait(v, timeout=2.0)
    gpu.clear_error()
    gpu.wait(v, timeout=2.0)
    assert list(gpu.download(d, 16).view("<u4")) == [1, 1, 3, 3]


# -- error paths: every bad programming gives its error code and a clear exception ------------
def test_misaligned_and_bad_descriptors(gpu):
    dva, buf = gpu.alloc_vram(4096), gpu.alloc_sys(4096)
    desc = gpu.alloc_sys(64, align=32)

    def dma_with(triple, count=1, addr=None):
        desc.view[:32] = C.descriptors([triple]).astype("<u8").view(np.uint8)
        return [C.dma(desc.addr if addr is None else addr, count)]

    expect(gpu, dma_with((buf.addr + 4, dva, 64)), errors.CommandError, E.MISALIGNED, buf.addr + 4)
    expect(gpu, dma_with((buf.addr, dva + 4, 64)), errors.CommandError, E.MISALIGNED, dva + 4)
    expect(gpu, dma_with((buf.addr, dva, 60)), errors.CommandError, E.MISALIGNED, 60)
    expect(gpu, dma_with((buf.addr, dva, 0)), errors.CommandError, E.BAD_DESCRIPTOR, 0)
    expect(gpu, dma_with((buf.addr, dva, C.MAX_DMA_BYTES + 8)), errors.CommandError, E.BAD_DESCRIPTOR)
    expect(gpu, dma_with((buf.addr, dva, 64), count=0), errors.CommandError, E.BAD_DESCRIPTOR, 0)
    expect(gpu, dma_with((buf.addr, dva, 64), count=C.MAX_DESCRIPTORS + 1), errors.CommandError, E.BAD_DESCRIPTOR)
    expect(gpu, dma_with((buf.addr, dva, 64), addr=desc.addr + 8), errors.CommandError, E.MISALIGNED)
    gpu.free_sys(buf)
    gpu.free_sys(desc)


def test_out_of_range_addresses_never_corrupt_memory(gpu):
    dva = gpu.alloc_vram(4096)
    size = len(gpu.sys_view)
    vram_before, sys_before = gpu.vram_view.copy(), gpu.sys_view.copy()
    desc = gpu.alloc_sys(32, align=32)
    desc.view[:] = C.descriptors([(size - 8, dva, 64)]).astype("<u8").view(np.uint8)
    sys_before[desc.addr:desc.addr + 32] = desc.view
    expect(gpu, [C.dma(desc.addr, 1, to_host=True)], errors.MemoryFaultError, E.SYSMEM_RANGE, size - 8)
    expect(gpu, [C.dma(size + 64, 1)], errors.MemoryFaultError, E.SYSMEM_RANGE)
    expect(gpu, [C.fence(size, 1)], errors.MemoryFaultError, E.SYSMEM_RANGE, size)
    expect(gpu, [C.fill(0, 8, 1)], errors.MemoryFaultError, E.MMU_FAULT, 0)  # DVA 0 is never mapped
    expect(gpu, [C.fill(dva + 4096 - 8, 16, 1)], errors.MemoryFaultError, E.MMU_FAULT, dva + 4096)
    beyond = gpu.pt_entries * R.PAGE_SIZE
    expect(gpu, [C.saxpy(beyond, dva, 4, 1.0)], errors.MemoryFaultError, E.MMU_FAULT, beyond)
    expect(gpu, [C.fill(1 << 62, 8, 1)], errors.MemoryFaultError, E.MMU_FAULT, 1 << 62)
    # nothing outside the driver's own fence/ring traffic changed
    assert np.array_equal(gpu.vram_view, vram_before)
    ring = slice(gpu.ring.addr, gpu.ring.addr + gpu.ring.nbytes)
    fence = slice(gpu.fence_slot.addr, gpu.fence_slot.addr + 64)
    now = gpu.sys_view.copy()
    for s in (ring, fence):
        now[s] = sys_before[s] = 0
    assert np.array_equal(now, sys_before)
    gpu.free_sys(desc)


def test_unmapped_and_read_only_pages(gpu):
    ro = gpu.alloc_vram(4096, writable=False)
    rw = gpu.alloc_vram(4096)
    gpu.run([C.saxpy(ro, rw, 16, 1.0)])  # reading a read-only page is fine
    expect(gpu, [C.fill(ro, 8, 1)], errors.MemoryFaultError, E.MMU_WRITE_FAULT, ro)
    expect(gpu, [C.saxpy(rw, ro, 16, 1.0)], errors.MemoryFaultError, E.MMU_WRITE_FAULT, ro)
    gpu.unmap(rw, 4096)
    assert gpu.translate(rw) is None
    expect(gpu, [C.fill(rw, 8, 1)], errors.MemoryFaultError, E.MMU_FAULT, rw)


def test_bad_page_table_registers(gpu):
    gpu.write("PT_BASE", 100)
    expect(gpu, [C.fill(4096, 8, 1)], errors.MemoryFaultError, E.PAGE_TABLE, 100)
    gpu.write("PT_ENTRIES", 1 << 40)
    expect(gpu, [C.fill(4096, 8, 1)], errors.MemoryFaultError, E.PAGE_TABLE)


def test_bad_opcode(gpu):
    bad = C.nop()
    bad[0] = 0x7F
    expect(gpu, [bad], errors.CommandError, E.BAD_OPCODE, 0x7F)


def test_doorbell_errors(gpu):
    with pytest.raises(errors.RingError, match="EMPTY_DOORBELL"):
        gpu.write("DOORBELL", gpu.wptr)
    gpu.recover()
    with pytest.raises(errors.RingError, match="RING_OVERFLOW"):
        gpu.write("DOORBELL", gpu.wptr + gpu.ring_entries + 1)
    gpu.recover()
    gpu.run([C.nop()])
    with pytest.raises(errors.RingError, match="BAD_DOORBELL"):
        gpu.write("DOORBELL", 0)
    gpu.recover()
    gpu.write("CONTROL", 0)  # ring off
    with pytest.raises(errors.RingError, match="RING_OFF"):
        gpu.write("DOORBELL", 1)


def test_bad_ring_configuration(gpu):
    gpu.write("CONTROL", 0)
    gpu.write("RING_SIZE", 48)
    with pytest.raises(errors.RingError, match="RING_CONFIG"):
        gpu.write("CONTROL", R.Control.RING_ENABLE)
    assert gpu.read("ERROR_INFO") == 48
    gpu.recover()
    gpu.write("CONTROL", 0)
    gpu.write("RING_BASE", len(gpu.sys_view) - 64)
    with pytest.raises(errors.RingError, match="RING_CONFIG"):
        gpu.write("CONTROL", R.Control.RING_ENABLE)


def test_driver_refuses_ring_overflow_and_waits_for_space(gpu):
    with pytest.raises(errors.RingFullError, match="indirect buffer"):
        gpu.submit([C.nop()] * gpu.ring_entries)  # plus a fence: can never fit
    # many more commands than the ring holds: submit waits for space, never overwrites
    before = gpu.device_counters()["CNT_COMMANDS"]
    for _ in range(5):
        v = gpu.submit([C.nop()] * (gpu.ring_entries // 2))
    gpu.wait(v, timeout=3.0)
    assert gpu.device_counters()["CNT_COMMANDS"] - before == 5 * (gpu.ring_entries // 2 + 1)


def test_driver_argument_errors(gpu):
    with pytest.raises(ValueError, match="multiples of 8"):
        gpu.upload(np.zeros(5, np.uint8), 4096)
    with pytest.raises(ValueError, match="runs past the aperture"):
        gpu.bar1_read(gpu.bar1_size - 8, 16)
    with pytest.raises(ValueError, match="mode"):
        gpu.bar1_write(0, b"12345678", mode="fast")
    with pytest.raises(ValueError, match="how"):
        gpu.wait(1, how="spin")
    with pytest.raises(TypeError):
        gpu.read(1.0)
    with pytest.raises(ValueError, match="8 uint64 words"):
        gpu.emit(np.zeros(4, np.uint64))
    with pytest.raises(ValueError, match="multiple of 4096"):
        ToyGPU(vram_bytes=100_000)


def test_bar1_access_costs_are_modelled_and_counted(gpu):
    c0 = gpu.counters.copy()
    gpu.bar1_read(0, 4096, width=8)
    rd = gpu.counters - c0
    assert rd.mmio_reads == 512 and rd.bar_bytes_read == 4096
    c1 = gpu.counters.copy()
    gpu.bar1_write(0, np.zeros(4096, np.uint8), mode="uc")
    uc = gpu.counters - c1
    c2 = gpu.counters.copy()
    gpu.bar1_write(0, np.zeros(4096, np.uint8), mode="wc")
    wc = gpu.counters - c2
    assert uc.mmio_writes == 512 and wc.wc_bursts == 64
    assert rd.cpu_model_ns > 5 * uc.cpu_model_ns > 5 * wc.cpu_model_ns


# -- BAR1: an aperture translated by the device's own page table ---------------------------------
def test_bar1_reaches_vram_only_where_its_table_maps(gpu):
    dva = gpu.alloc_vram(3 * R.PAGE_SIZE)
    data = np.random.default_rng(2).integers(0, 256, 3 * R.PAGE_SIZE, dtype=np.uint8)
    gpu.upload(data, dva)
    ap = gpu.bar1_map_dva(dva, data.size)
    assert np.array_equal(gpu.bar1_read(ap, data.size), data)  # scattered VRAM pages, one aperture run
    gpu.bar1_write(ap + 8, np.full(8, 7, np.uint8))
    assert list(gpu.download(dva, 16)[8:]) == [7] * 8
    gpu.bar1_unmap(ap, data.size)
    gpu.check()  # nothing faulted so far
    assert set(gpu.bar1_read(ap, 64).tolist()) == {R.BAR1_UNMAPPED_BYTE}  # all ones, as PCIe returns
    with pytest.raises(errors.MemoryFaultError, match="BAR1_FAULT") as err:
        gpu.check()
    assert err.value.info == ap
    gpu.recover()
    gpu.bar1_write(ap, np.zeros(64, np.uint8))  # a store to an unmapped page is recorded ...
    with pytest.raises(errors.MemoryFaultError, match="BAR1_FAULT"):
        gpu.check()
    gpu.recover()  # ... and dropped
    assert np.array_equal(gpu.download(dva, 64), np.r_[data[:8], [7] * 8, data[16:64]].astype(np.uint8))


def test_bar1_translation_off_and_bad_tables_are_device_errors(gpu):
    gpu.write("BAR1_PT_BASE", 0)  # translation off: every aperture page is unmapped
    assert set(gpu.bar1_read(0, 16).tolist()) == {R.BAR1_UNMAPPED_BYTE}
    with pytest.raises(errors.MemoryFaultError, match="BAR1_FAULT"):
        gpu.check()
    gpu.recover()
    for bad in (100 | R.BAR1_PT_ENABLE, len(gpu.vram_view) | R.BAR1_PT_ENABLE):
        with pytest.raises(errors.MemoryFaultError, match="PAGE_TABLE"):
            gpu.write("BAR1_PT_BASE", bad)
        assert gpu.read("BAR1_PT_BASE") == 0
        gpu.recover()
    gpu.write("VRAM_WINDOW", len(gpu.vram_view))
    with pytest.raises(errors.MemoryFaultError, match="VRAM_WINDOW"):
        gpu.write("VRAM_DATA", 1)
    gpu.recover()
    gpu.run([C.nop()])


def test_a_small_aperture_maps_windows_of_a_larger_vram():
    with start_device(vram_bytes=2 << 20, sysmem_bytes=2 << 20, bar1_bytes=256 << 10) as g:
        assert g.read("BAR1_SIZE") == 256 << 10 < g.read("VRAM_SIZE")
        dva = g.alloc_vram(1 << 20)
        g.upload(np.arange(1 << 18, dtype=np.uint32), dva)
        for k in range(4):  # slide a 128 KiB window over the 1 MiB buffer
            ap = g.bar1_map_dva(dva + k * (256 << 10), 128 << 10)
            got = g.bar1_read(ap, 128 << 10).view("<u4")
            assert got[0] == k * (1 << 16) and got[-1] == k * (1 << 16) + (1 << 15) - 1
            g.bar1_unmap(ap, 128 << 10)
        with pytest.raises(MemoryError, match="aperture exhausted"):
            g.bar1_map_dva(dva, 1 << 20)
        g.check()


def test_device_lost_is_reported(gpu):
    g = start_device()
    g.proc.kill()
    g.proc.wait()
    with pytest.raises(errors.DeviceLostError):
        g.read("ID")
    g.close()
    with pytest.raises(errors.DeviceLostError, match="closed"):
        g.read("ID")
