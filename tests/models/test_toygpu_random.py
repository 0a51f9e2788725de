"""Random command streams: the toy GPU always completes them correctly or reports the right
error, within a time bound, and never corrupts memory outside what the commands address.

Each stream is generated from a fixed numpy seed: mostly valid commands (FILL, DMA with
scatter-gather, SAXPY, FENCE, INTERRUPT, NOP, INDIRECT) over a small VRAM region, checked
against a numpy mirror of that region, with (half the time) one fault injected at a random
position. A fault must halt the device with the fault's error code, every command before it
must have taken effect and none after it.
"""

from __future__ import annotations

import numpy as np
import pytest
from toygpu_util import start_device

from helpers.core.errors import DeviceTimeoutError
from helpers.models.toygpu import commands as C
from helpers.models.toygpu import errors
from helpers.models.toygpu import regs as R

E = R.ErrorCode
REGION_PAGES = 8
STREAMS = 120
TIME_BOUND_S = 2.0


@pytest.fixture(scope="module")
def rig():
    gpu = start_device(seed=5)
    region = gpu.alloc_vram(REGION_PAGES * R.PAGE_SIZE)
    ro = gpu.alloc_vram(R.PAGE_SIZE, writable=False)
    hole = gpu.alloc_vram(R.PAGE_SIZE)
    gpu.unmap(hole, R.PAGE_SIZE)
    src = gpu.alloc_sys(64 << 10, align=64)          # source data for DMAs
    desc = gpu.alloc_sys(64 << 10, align=64)         # descriptor tables
    ibs = gpu.alloc_sys(64 << 10, align=64)          # indirect buffers
    mirror = np.zeros(REGION_PAGES * R.PAGE_SIZE, np.uint8)
    gpu.upload(mirror, region)
    yield dict(gpu=gpu, region=region, ro=ro, hole=hole, src=src, desc=desc, ibs=ibs, mirror=mirror)
    gpu.close()


class Stream:
    """Builds one random stream and the mirror's expected effect, command by command."""

    def __init__(self, rig: dict, rng: np.random.Generator):
        self.r, self.rng = rig, rng
        self.desc_used = self.ib_used = 0
        self.size = REGION_PAGES * R.PAGE_SIZE

    def _span(self, align: int, max_len: int = 4096) -> tuple[int, int]:
        n = int(self.rng.integers(1, max_len // align + 1)) * align
        off = int(self.rng.integers(0, (self.size - n) // align + 1)) * align
        return off, n

    def _desc_table(self, triples) -> int:
        words = C.descriptors(triples).astype("<u8").view(np.uint8)
        addr = self.r["desc"].addr + self.desc_used
        self.r["desc"].view[self.desc_used:self.desc_used + words.size] = words
        self.desc_used += -(-words.size // 64) * 64
        return addr

    def _ib(self, cmds) -> int:
        addr = self.r["ibs"].addr + self.ib_used
        n = len(cmds) * C.ENTRY_BYTES
        self.r["ibs"].view[self.ib_used:self.ib_used + n] = np.concatenate(cmds).astype("<u8").view(np.uint8)
        self.ib_used += n
        return addr

    def valid(self, mirror: np.ndarray, depth: int = 0):
        """A random valid command; applies its effect to `mirror`."""
        kind = self.rng.choice(["fill", "dma", "saxpy", "nop", "fence", "irq", "ib"],
                               p=[.25, .25, .2, .08, .08, .06, .08])
        base = self.r["region"]
        if kind == "fill":
            off, n = self._span(4)
            pat = int(self.rng.integers(0, 1 << 32))
            mirror[off:off + n] = np.full(n // 4, pat, "<u4").view(np.uint8)
            return C.fill(base + off, n, pat)
        if kind == "dma":
            src = self.r["src"]
            triples = []
            for _ in range(int(self.rng.integers(1, 4))):
                off, n = self._span(8)
                s = int(self.rng.integers(0, (src.nbytes - n) // 8 + 1)) * 8
                mirror[off:off + n] = src.view[s:s + n]
                triples.append((src.addr + s, base + off, n))
            return C.dma(self._desc_table(triples), len(triples))
        if kind == "saxpy":
            n = int(self.rng.integers(1, 513))
            xo = int(self.rng.integers(0, (self.size - 4 * n) // 4 + 1)) * 4
            yo = int(self.rng.integers(0, (self.size - 4 * n) // 4 + 1)) * 4
            a = float(np.float32(self.rng.normal()))
            x = mirror[xo:xo + 4 * n].view("<f4").copy()
            y = mirror[yo:yo + 4 * n].view("<f4").copy()
            with np.errstate(all="ignore"):
                mirror[yo:yo + 4 * n] = (np.float32(a) * x + y).astype("<f4").view(np.uint8)
            return C.saxpy(base + xo, base + yo, n, a)
        if kind == "fence":
            slot = self.r["desc"].addr + self.r["desc"].nbytes - 8  # a spare word: no DMA reads it
            return C.fence(slot, int(self.rng.integers(1, 1 << 40)))
        if kind == "irq":
            return C.interrupt()
        if kind == "ib" and depth < C.MAX_IB_DEPTH:
            inner = [self.valid(mirror, depth + 1) for _ in range(int(self.rng.integers(1, 4)))]
            return C.indirect(self._ib(inner), len(inner))
        return C.nop()

    def fault(self):
        """A random bad command and the error code the device must report for it."""
        kind = int(self.rng.integers(0, 9))
        base, size = self.r["region"], len(self.r["gpu"].sys_view)
        if kind == 0:
            bad = C.nop()
            bad[0] = int(self.rng.integers(7, 256))
            return bad, E.BAD_OPCODE
        if kind == 1:
            return C.fill(base + 2, 8, 0), E.MISALIGNED
        if kind == 2:
            return C.fill(self.r["hole"] + 8 * int(self.rng.integers(0, 512)), 8, 0), E.MMU_FAULT
        if kind == 3:
            return C.fill(self.r["ro"], 8, 0), E.MMU_WRITE_FAULT
        if kind == 4:
            return C.dma(self._desc_table([(size - 8, base, 64)]), 1), E.SYSMEM_RANGE
        if kind == 5:
            return C.dma(self._desc_table([(self.r["src"].addr, base, 12)]), 1), E.MISALIGNED
        if kind == 6:
            return C.dma(self._desc_table([(self.r["src"].addr, base, 64)]), 0), E.BAD_DESCRIPTOR
        if kind == 7:
            leaf = self._ib([C.nop()])
            mid = self._ib([C.indirect(leaf, 1)])
            top = self._ib([C.indirect(mid, 1)])
            return C.indirect(top, 1), E.IB_DEPTH
        return C.saxpy(base, base + REGION_PAGES * R.PAGE_SIZE * 64, 4, 1.0), E.MMU_FAULT


@pytest.mark.parametrize("chunk", range(4))
def test_random_command_streams(rig, chunk):
    gpu, mirror = rig["gpu"], rig["mirror"]
    for seed in range(chunk * STREAMS // 4, (chunk + 1) * STREAMS // 4):
        rng = np.random.default_rng(seed)
        rig["src"].view[:] = rng.integers(0, 256, rig["src"].nbytes, dtype=np.uint8)
        s = Stream(rig, rng)
        n = int(rng.integers(1, 16))
        fault_at = int(rng.integers(0, n)) if rng.random() < 0.5 else None
        expected = mirror.copy()
        cmds, code = [], None
        for i in range(n):
            if i == fault_at:
                bad, code = s.fault()
                cmds.append(bad)
                applied = expected.copy()  # the state the device must stop in
            cmds.append(s.valid(expected))
        if fault_at is None:
            applied = expected
        # submit in one or several doorbells, then wait for the last fence
        cuts = sorted(set(rng.integers(0, len(cmds), int(rng.integers(0, 3))).tolist()) | {0, len(cmds)})
        try:  # each doorbell and the wait are bounded by TIME_BOUND_S: no stream can hang the test
            for a, b in zip(cuts, cuts[1:], strict=False):
                last = gpu.submit(cmds[a:b], timeout=TIME_BOUND_S)
            gpu.wait(last, timeout=TIME_BOUND_S)
            got = None
        except errors.DeviceError as err:
            got = err.code
        except DeviceTimeoutError as err:
            pytest.fail(f"stream {seed}: timed out instead of completing or failing: {err}")
        assert got == code, f"stream {seed}: expected {code}, device said {got}"
        if got is not None:
            gpu.recover()
        now = gpu.download(rig["region"], mirror.size)
        assert np.array_equal(now, applied), f"stream {seed}: VRAM differs from the mirror"
        mirror[:] = now
