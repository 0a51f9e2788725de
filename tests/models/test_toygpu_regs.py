"""The register map, command table and link model: one source of truth, kept consistent."""

from __future__ import annotations

import pytest

from helpers.models.toygpu import ToyGPU, commands, errors, link, regs


def test_register_map_is_consistent():
    regs.check_map()
    offsets = [r.offset for r in regs.REGISTERS]
    assert len(set(offsets)) == len(offsets)
    assert all(o % 8 == 0 and o < regs.BAR0_SIZE for o in offsets)
    for name in ("ID", "STATUS", "ERROR_CODE", "INT_STATUS", "INT_MASK", "DOORBELL", "RING_BASE",
                 "RING_SIZE", "RING_HEAD", "RING_TAIL", "LAST_FENCE", "PT_BASE"):
        assert name in regs.BY_NAME, f"the issue asks for a {name} register"


def test_check_map_catches_overlap(monkeypatch):
    bad = regs.REGISTERS + (regs.Register(name="DUP", offset=0x000, access=regs.RW, doc="overlaps ID"),)
    monkeypatch.setattr(regs, "REGISTERS", bad)
    with pytest.raises(AssertionError, match="overlaps"):
        regs.check_map()


def test_docs_table_is_generated_from_the_map():
    table = regs.markdown_table()
    for r in regs.REGISTERS:
        assert f"`{r.name}`" in table and f"0x{r.offset:03X}" in table
    assert len(table.splitlines()) == len(regs.REGISTERS) + 2
    ctable = commands.markdown_table()
    for op in commands.Op:
        assert f"`{op.name}`" in ctable


def test_every_error_code_has_text_and_an_exception_class():
    for code in regs.ErrorCode:
        assert regs.ERROR_TEXT[code]
        if code is not regs.ErrorCode.NONE:
            assert issubclass(errors.ERROR_CLASS[code], errors.DeviceError)


def test_register_lookup_errors():
    with pytest.raises(ValueError, match="no register 'NOPE'"):
        regs.register("NOPE")
    with pytest.raises(TypeError):
        regs.register(3)
    assert regs.offset("scratch") == regs.BY_NAME["SCRATCH"].offset


def test_device_enforces_access_kinds(gpu: ToyGPU):
    """Every RW register reads back what was written; every RO one refuses writes."""
    for r in regs.REGISTERS:
        if r.access == regs.RW and r.name not in ("CONTROL", "INT_MASK", "RING_BASE", "RING_SIZE",
                                                  "PT_BASE", "PT_ENTRIES"):
            gpu.write(r.name, 0x1234_5678_9ABC_DEF0)
            assert gpu.read(r.name) == 0x1234_5678_9ABC_DEF0, r.name
        elif r.access == regs.WO:
            assert gpu.read(r.name) == 0, f"write-only {r.name} must read 0"
    for r in regs.REGISTERS:
        if r.access == regs.RO:
            before = gpu.read(r.name) if r.name not in ("BUS_WRITES_SEEN",) else None
            with pytest.raises(errors.RegisterError, match=f"RO_WRITE.*register {r.name}"):
                gpu.write(r.name, 7)
            assert gpu.read("ERROR_INFO") == r.offset
            gpu.clear_error()
            if before is not None and r.name not in ("STATUS", "MODEL_TIME_NS", "ERROR_CODE",
                                                     "ERROR_INFO", "INT_STATUS"):
                assert gpu.read(r.name) == before, f"a refused write changed {r.name}"


def test_unmapped_and_misaligned_register_writes(gpu: ToyGPU):
    with pytest.raises(errors.RegisterError, match="BAD_REGISTER.*no register there"):
        gpu.write(0xFF8, 1)
    gpu.clear_error()
    with pytest.raises(errors.RegisterError, match="BAD_REGISTER"):
        gpu.write(0x0C9, 1)
    gpu.clear_error()
    with pytest.raises(ValueError, match="not 8-byte aligned"):
        gpu.read(0x0C9)
    with pytest.raises(ValueError, match=f"register offset must be from 0 to {regs.BAR0_SIZE - 1}"):
        gpu.write(regs.BAR0_SIZE, 1)


def test_id_and_sizes(gpu: ToyGPU):
    assert gpu.read("ID") == regs.DEVICE_ID
    assert gpu.read("VRAM_SIZE") == len(gpu.vram_view)
    assert gpu.read("STATUS") & regs.Status.READY


def test_link_model_is_deterministic_and_ordered():
    a, b = link.LinkModel(seed=7), link.LinkModel(seed=7)
    seq = lambda m: [m.uc_reads(1000), m.uc_writes(1000), m.wc_writes(8000), m.dma(1 << 20)]  # noqa: E731
    assert seq(a) == seq(b)
    m = link.LinkModel(link.LinkParams(jitter=0.0))
    assert m.uc_reads(1000) > 10 * m.uc_writes(1000), "a non-posted read must cost a round trip"
    assert m.wc_writes(8000) < m.uc_writes(1000) / 4, "64-byte bursts must beat 8-byte stores"
    p = m.params
    assert m.half_bandwidth_bytes() == pytest.approx(p.dma_latency_ns * p.dma_gbps)
    assert m.dma(0) == pytest.approx(p.dma_latency_ns)


def test_link_params_validation():
    with pytest.raises(ValueError, match="link_gbps"):
        link.LinkParams(link_gbps=0)
    with pytest.raises(ValueError, match="jitter"):
        link.LinkParams(jitter=float("nan"))
    with pytest.raises(ValueError, match="seed"):
        link.LinkModel(seed=-1)
    with pytest.raises(ValueError, match="width"):
        link.LinkModel().uc_reads(1, 3)


def test_command_encoders_validate_arguments():
    with pytest.raises(ValueError, match="64 unsigned bits"):
        commands.fill(-1, 8, 0)
    with pytest.raises(TypeError):
        commands.fill(1.5, 8, 0)
    with pytest.raises(ValueError, match="descriptor 0"):
        commands.descriptors([(1, 2)])
    assert "SAXPY n=4 a=2" in commands.describe(commands.saxpy(0, 0, 4, 2.0))
