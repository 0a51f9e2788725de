"""Support for Lab 1 (write a driver for the toy GPU): randomised devices, the driver's state,
the given allocator and the graded checks. Not the lab's answer: that lives with the
instructor (instructor/labs/lab1_driver.py), outside the student distribution.

Lab rules this module implements (course design, "Labs"):

- *Randomised devices.* `lab_device(seed)` draws VRAM size, BAR1 aperture size and the VRAM
  the device reserves for itself from the seed, and `ring_size(seed)` the ring the check asks
  for; a driver built on constants fails on the next seed. The visible checks use
  VISIBLE_SEEDS; autograding uses seeds the student never sees.
- *Each part graded on its own.* A check runs through `Parts`: it calls the learner's functions
  for the part under test, and for every other part a stand-in (swapped into the notebook's
  namespace for the duration of the check, so a learner's `bring_up` calling `map_bar1` gets the
  stand-in's). In the visible checks the stand-ins are the course's (lab1_standins, which reach
  the parts' results through the simulator's back doors and give no solution away); at
  autograde the hidden test hands `Parts` the instructor's reference instead. One wrong or
  unfinished `map_bar1` costs the map_bar1 points, not Parts 3-8, and a learner stuck on
  Part 3 still gets feedback on Parts 4-8.
- *No points without new code.* Every part asks for a function; an unwritten one raises
  NotImplementedError and its check fails.

The devices have no firmware (`ToyGPU(firmware=False)`): nothing on them builds a page table or
programs the ring except the learner's code.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from helpers.core import validate
from helpers.core.errors import DeviceTimeoutError
from helpers.models.toygpu import commands as cmd
from helpers.models.toygpu import regs
from helpers.models.toygpu.bus import Buffer
from helpers.models.toygpu.driver import ToyGPU
from helpers.models.toygpu.errors import CommandError, MemoryFaultError, RingFullError, ToyGPUError

VISIBLE_SEEDS = (11, 12)
PAGE = regs.PAGE_SIZE
#: graded check -> the functions it grades; every other part is the reference's at autograde
CHECKS = {
    "identify_device": ("identify",),
    "map_bar1": ("map_bar1",),
    "bring_up": ("bring_up",),
    "submit_and_wait": ("submit", "wait_fence"),
    "dma_copies": ("copy_to_vram", "copy_from_vram"),
    "compute": ("saxpy",),
    "batching": ("run_batched",),
    "recovery": ("recover",),
}
FUNCTIONS = tuple(f for fs in CHECKS.values() for f in fs)


# -- devices ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceParams:
    """What a seed decides about a lab device."""

    vram_bytes: int
    bar1_bytes: int
    reserved_bytes: int
    ring_entries: int


def params(seed: int) -> DeviceParams:
    """The device parameters and ring size a check uses for `seed` (deterministic)."""
    seed = validate.whole_number(seed, "seed", 0)
    rng = np.random.default_rng([1, seed])
    vram = int(rng.choice([1, 2, 4])) << 20
    bar1 = max(256 << 10, vram >> int(rng.integers(0, 3)))
    reserved = int(rng.choice([1, 2, 3, 5])) * PAGE
    return DeviceParams(vram, bar1, reserved, int(rng.choice([8, 16, 32])))


def lab_device(seed: int, **overrides) -> ToyGPU:
    """A toy GPU with the parameters `seed` draws, powered on, no firmware, nothing set up."""
    p = params(seed)
    args = dict(vram_bytes=p.vram_bytes, bar1_bytes=p.bar1_bytes, reserved_bytes=p.reserved_bytes,
                sysmem_bytes=4 << 20, seed=seed, timeout=3.0, bring_up=False, firmware=False)
    args.update(overrides)
    return ToyGPU(**args)


# -- the driver's state (given) -------------------------------------------------------------------
@dataclass(kw_only=True)
class LabDriver:
    """Everything the learner's driver keeps about one device."""

    dev: ToyGPU        # the bus: MMIO, BAR1, system memory
    ring: Buffer       # the command ring, in system memory
    fence: Buffer      # 8 bytes the device writes fence values to
    rptr: Buffer       # 16 bytes the device writes its read pointer and error code to
    entries: int       # ring size in entries
    pt_base: int       # VRAM offset of the device MMU's page table
    pages: int         # entries in it (one per VRAM page)
    bar1_table: int    # VRAM offset of BAR1's page table
    first_dva: int     # first mapped device virtual address
    wptr: int = 0      # commands written so far (free-running)
    next_fence: int = 0  # last fence value handed out
    doorbells: int = 0   # doorbell writes made
    vram_next: int = 0   # used by vram_alloc (given)


def vram_alloc(drv: LabDriver, nbytes: int) -> int:
    """A bump allocator over the identity-mapped VRAM (given): a device virtual address."""
    dva = max(drv.vram_next, drv.first_dva)
    end = dva + -(-int(nbytes) // PAGE) * PAGE
    if end > drv.pages * PAGE:
        raise MemoryError(f"lab VRAM exhausted: {nbytes} bytes wanted")
    drv.vram_next = end
    return dva


def layout(vram_bytes: int, bar1_bytes: int, reserved_bytes: int) -> dict[str, int]:
    """Part 3's VRAM layout rule, for the checks: BAR1's table first after the reserved VRAM,
    the MMU's table after it, buffers after that."""
    table = -(-reserved_bytes // PAGE) * PAGE
    pt_base = table + -(-(bar1_bytes // PAGE) * 8 // PAGE) * PAGE
    pages = vram_bytes // PAGE
    first_dva = pt_base + -(-pages * 8 // PAGE) * PAGE
    return {"bar1_table": table, "pt_base": pt_base, "pages": pages, "first_dva": first_dva}


# -- grading one part on its own ------------------------------------------------------------------
class Parts:
    """The functions a check calls: the learner's for the parts this check grades, and for every
    other part a stand-in, so one unfinished part never hides another part's feedback. In the
    visible checks the stand-ins are the course's (helpers.labs.lab1_standins: the parts' results
    reached through the simulator's back doors, no solution); at autograde (given `reference`)
    they are the instructor's reference, with its unseen seeds."""

    def __init__(self, namespace: dict, check: str, reference=None):
        if check not in CHECKS:
            raise KeyError(f"no graded check {check!r}; Lab 1 has {', '.join(CHECKS)}")
        self.ns, self.own, self.reference = namespace, CHECKS[check], reference
        self.seeds = tuple(reference.SEEDS[check]) if reference is not None else VISIBLE_SEEDS
        if reference is None:
            from helpers.labs import lab1_standins

            self.others = {n: getattr(lab1_standins, n) for n in lab1_standins.FUNCTIONS if n not in self.own}
        else:
            self.others = {n: getattr(reference, n) for n in FUNCTIONS if n not in self.own}

    def __getattr__(self, name: str):
        if name not in FUNCTIONS:
            raise AttributeError(name)
        if name in self.others:
            return self.others[name]
        if name not in self.ns:
            raise NameError(f"{name} is not defined: run its cell first")
        return self.ns[name]

    @contextmanager
    def active(self) -> Iterator[Parts]:
        """While the check runs, the notebook's other parts are the stand-ins (or the reference)."""
        saved = {n: self.ns[n] for n in self.others if n in self.ns}
        self.ns.update(self.others)
        try:
            yield self
        finally:
            for n in self.others:
                self.ns.pop(n, None)
            self.ns.update(saved)


def _differences(got: dict, want: dict, expected: str = "the device says") -> str:
    """Name the keys that are wrong, missing or extra, with both values (not two whole dicts)."""
    def show(v) -> str:
        return f"{v:#x}" if isinstance(v, int) and not isinstance(v, bool) else repr(v)

    parts = [f"'{k}' is {show(got[k])}, {expected} {show(want[k])}"
             for k in want if k in got and got[k] != want[k]]
    parts += [f"'{k}' is missing" for k in want if k not in got]
    parts += [f"'{k}' is not asked for" for k in got if k not in want]
    return "; ".join(parts)


class FakeBus:
    """A stand-in bus whose registers hold whatever the check puts there (SIMULATED)."""

    def __init__(self, values: dict):
        self.values = values

    def read(self, name: str) -> int:
        return self.values[name]


def _status(dev: ToyGPU) -> regs.Status:
    return regs.Status(dev.read("STATUS"))


def _no_error(c, dev: ToyGPU, when: str) -> None:
    st = _status(dev)
    c.require(not st & regs.Status.ERROR,
              f"the device reports {regs.ErrorCode(dev.read('ERROR_CODE')).name} {when}")


def _ready(parts: Parts, seed: int) -> tuple[ToyGPU, LabDriver]:
    dev = lab_device(seed)
    try:
        return dev, parts.bring_up(dev, params(seed).ring_entries)
    except BaseException:
        dev.close()
        raise


# -- the checks -----------------------------------------------------------------------------------
def check_identify(c, parts: Parts) -> None:
    """Part 1: the identification registers, on random devices; refuse a wrong ID."""
    for seed in parts.seeds:
        with lab_device(seed) as dev:
            info = parts.identify(dev)
            c.require(isinstance(info, dict), f"identify should return a dict, got {type(info).__name__}")
            p = params(seed)
            want = {"id": regs.DEVICE_ID, "vram_bytes": p.vram_bytes, "sysmem_bytes": 4 << 20,
                    "bar1_bytes": p.bar1_bytes, "reserved_bytes": p.reserved_bytes}
            c.require(info == want, f"identify's answer differs from the device (seed {seed}): {_differences(info, want)}")
    for bad in (0, 0xFFFF_FFFF_FFFF_FFFF, regs.DEVICE_ID + 1):
        values = {"ID": bad, "VRAM_SIZE": 1 << 20, "SYSMEM_SIZE": 1 << 20, "BAR1_SIZE": 1 << 20, "VRAM_RESERVED": 0}
        try:
            parts.identify(FakeBus(values))
        except ToyGPUError:
            continue
        c.require(False, f"identify accepted a device whose ID reads {bad:#x}; a driver must refuse it "
                         "(an all-ones read is what a missing PCI device returns)")


def check_map_bar1(c, parts: Parts) -> None:
    """Part 2: BAR1's table at a random place, mapping random pages; unmapped pages fault."""
    for seed in parts.seeds:
        rng = np.random.default_rng([2, seed])
        p = params(seed)
        with lab_device(seed) as dev:
            entries = p.bar1_bytes // PAGE
            vram_pages = p.vram_bytes // PAGE
            first = -(-p.reserved_bytes // PAGE) + int(rng.integers(0, 4))
            table = first * PAGE
            table_pages = -(-entries * 8 // PAGE)
            free = np.arange(first + table_pages, vram_pages)
            n = int(rng.integers(3, min(entries, free.size) - 1))
            pages = [int(x) * PAGE for x in rng.choice(free, n, replace=False)]
            stale = np.full(table_pages * PAGE // 8, table | regs.PTE_VALID | regs.PTE_WRITABLE, "<u8")
            dev.vram_view[table:table + stale.nbytes] = stale.view(np.uint8)  # yesterday's table: write it whole
            parts.map_bar1(dev, table, pages)
            c.require(dev.read("BAR1_PT_BASE") == table | regs.BAR1_PT_ENABLE,
                      f"BAR1_PT_BASE is {dev.read('BAR1_PT_BASE'):#x}; the table is at {table:#x} and "
                      "translation must be on (BAR1_PT_ENABLE)")
            _no_error(c, dev, "after map_bar1")
            ap = dev.aperture()
            for k in (0, n // 2, n - 1):
                data = rng.integers(0, 256, 64, dtype=np.uint8)
                dev.vram_view[pages[k] + 128:pages[k] + 192] = data
                c.require(np.array_equal(ap[k * PAGE + 128:k * PAGE + 192], data),
                          f"aperture page {k} does not show VRAM page {pages[k] // PAGE} (seed {seed})")
            ap[(n - 1) * PAGE:(n - 1) * PAGE + 8] = np.full(8, 0x5A, np.uint8)
            c.require(np.all(dev.vram_view[pages[n - 1]:pages[n - 1] + 8] == 0x5A),
                      "a store through the aperture did not land in the VRAM page its entry names")
            _no_error(c, dev, "after accesses to mapped pages")
            c.require(np.all(ap[n * PAGE:n * PAGE + 8] == 0xFF) and dev.read("ERROR_CODE") == regs.ErrorCode.BAR1_FAULT,
                      f"aperture page {n} should be unmapped (entry 0): it must read as all ones and fault")


def check_bring_up(c, parts: Parts) -> None:
    """Part 3: registers, both tables and the driver's state follow the layout rule."""
    for seed in parts.seeds:
        p = params(seed)
        with lab_device(seed) as dev:
            drv = parts.bring_up(dev, p.ring_entries)
            c.require(isinstance(drv, LabDriver), f"bring_up should return a LabDriver, got {type(drv).__name__}")
            _no_error(c, dev, "after bring-up")
            c.require(_status(dev) & regs.Status.RING_ON, "the ring is not on: write RING_ENABLE last")
            want = layout(p.vram_bytes, p.bar1_bytes, p.reserved_bytes)
            got = {k: getattr(drv, k) for k in want}
            c.require(got == want, f"the driver's layout differs from the rule (seed {seed}): {_differences(got, want, 'the rule gives')}")
            regs_want = {"RING_BASE": drv.ring.addr, "RING_SIZE": p.ring_entries, "RPTR_ADDR": drv.rptr.addr,
                         "PT_BASE": want["pt_base"], "PT_ENTRIES": want["pages"],
                         "BAR1_PT_BASE": want["bar1_table"] | regs.BAR1_PT_ENABLE}
            for name, v in regs_want.items():
                c.require(dev.read(name) == v, f"{name} is {dev.read(name):#x}, expected {v:#x}")
            c.require(drv.entries == p.ring_entries and drv.ring.nbytes >= p.ring_entries * cmd.ENTRY_BYTES,
                      f"the ring must have the {p.ring_entries} entries asked for")
            pt = dev.vram_view[want["pt_base"]:want["pt_base"] + want["pages"] * 8].view("<u8")
            low = want["first_dva"] // PAGE
            c.require(not pt[:low].any(), "device virtual pages below first_dva must stay unmapped (entries 0)")
            for i in (low, (low + want["pages"]) // 2, want["pages"] - 1):
                e = i * PAGE | regs.PTE_VALID | regs.PTE_WRITABLE
                c.require(int(pt[i]) == e, f"MMU entry {i} is {int(pt[i]):#x}, expected {e:#x}")
            data = np.arange(64, dtype=np.uint8)
            dev.vram_view[want["first_dva"] + 8:want["first_dva"] + 72] = data
            c.require(np.array_equal(dev.aperture()[8:72], data),
                      "BAR1's first page should show the first buffer page (VRAM at first_dva)")


def check_submit_and_wait(c, parts: Parts) -> None:
    """Part 4: the ring wraps, the hot path makes no MMIO reads, a full ring is refused before
    anything is written, errors and timeouts surface."""
    for seed in parts.seeds:
        dev, drv = _ready(parts, seed)
        with dev:
            n = drv.entries
            dva = vram_alloc(drv, 4096)
            values, mmio_reads = [], 0
            for k in range(n):  # n submits of 2 commands + fence: the ring wraps
                before = dev.counters.mmio_reads
                v = parts.submit(drv, [cmd.fill(dva, 4096, 0x1000 + k), cmd.fill(dva + 8 * k, 8, 0xABC0 + k)])
                mmio_reads += dev.counters.mmio_reads - before
                values.append(v)
                parts.wait_fence(drv, v, timeout=5.0)
                words = dev.vram_view[dva:dva + 4096].copy().view("<u4")
                c.require(words[2 * k] == 0xABC0 + k and words[2 * k + 2] == 0x1000 + k,
                          f"after submit {k + 1} VRAM does not hold what both commands wrote: were both run, in "
                          "order, and did wait_fence wait for the fence?")
            c.require(mmio_reads == 0, f"your {n} submits made {mmio_reads} MMIO reads: read the written-back "
                      "pointer (drv.rptr) instead of RING_HEAD")
            c.require(values == list(range(values[0], values[0] + n)),
                      f"fence values must go up by one with every submit, got {values}")
            c.require(dev.device_counters()["CNT_DOORBELLS"] == n == drv.doorbells,
                      f"{n} submits should ring {n} doorbells; the device saw "
                      f"{dev.device_counters()['CNT_DOORBELLS']}, your count is {drv.doorbells}")
            c.require(dev.read("RING_HEAD") == drv.wptr == 3 * n,
                      f"the device consumed {dev.read('RING_HEAD')} entries, your write pointer is {drv.wptr}; "
                      f"both should be {3 * n}")
            wptr = drv.wptr
            _expect(c, RingFullError, f"{n} commands + fence on a {n}-entry ring",
                    parts.submit, drv, [cmd.nop()] * n)
            c.require(drv.wptr == wptr and dev.device_counters()["CNT_DOORBELLS"] == n,
                      "a submit that does not fit must not write the ring or ring the doorbell")
            t0 = time.monotonic()
            _expect(c, DeviceTimeoutError, "waiting for a fence nobody submitted",
                    parts.wait_fence, drv, drv.next_fence + 100, timeout=0.3)
            c.require(time.monotonic() - t0 < 3.0, "wait_fence took far longer than its timeout")
            bad = cmd.nop()
            bad[0] = 0x7F
            v = parts.submit(drv, [bad] + [cmd.nop()] * (n // 2 - 2))  # halts at the bad command
            _expect(c, CommandError, "waiting on a fence behind an unknown opcode", parts.wait_fence, drv, v)
            room = n - (drv.wptr - int(drv.rptr.view[:8].view("<u8")[0]))
            parts.submit(drv, [cmd.nop()] * (room - 1))  # fills what the halted device leaves free
            wptr = drv.wptr
            _expect(c, RingFullError, "a submit while the halted device still holds the whole ring",
                    parts.submit, drv, [cmd.nop()])
            c.require(drv.wptr == wptr, "a refused submit changed the write pointer")
        dev, drv = _ready(parts, seed)
        with dev:
            v = parts.submit(drv, [cmd.fill(0, 64, 1)])  # DVA 0: never mapped
            _expect(c, MemoryFaultError, "a FILL at device address 0", parts.wait_fence, drv, v)


def _same_bytes(got, want: np.ndarray) -> bool:
    """`got` holds the bytes `want` holds, whatever its type (an array of any integer dtype, a list)."""
    try:
        arr = np.asarray(got)
    except (ValueError, TypeError):
        return False
    return arr.shape == want.shape and arr.dtype.kind in "iu" and np.array_equal(arr, want)


def _expect(c, exc_type, what: str, fn, *args, **kwargs) -> None:
    """Run fn(*args, **kwargs) and require exc_type."""
    try:
        fn(*args, **kwargs)
    except exc_type:
        return
    except Exception as err:  # noqa: BLE001 - reported to the learner
        c.require(False, f"{what}: expected {exc_type.__name__}, got {type(err).__name__}: {err}")
    c.require(False, f"{what}: expected {exc_type.__name__}, but nothing was raised")


def check_dma_copies(c, parts: Parts) -> None:
    """Part 5: scatter-gather DMA both ways, one descriptor per page, bad lengths refused early."""
    for seed in parts.seeds:
        rng = np.random.default_rng([5, seed])
        dev, drv = _ready(parts, seed)
        with dev:
            for nbytes in (8, 4096, 4096 + 8, int(rng.integers(1, 12_500)) * 8, min(1 << 20, dev.read("VRAM_SIZE") // 4)):
                data = rng.integers(0, 256, nbytes, dtype=np.uint8)
                dva = vram_alloc(drv, nbytes)
                before = dev.device_counters()
                parts.copy_to_vram(drv, data, dva)
                mid = dev.device_counters()
                moved = mid["CNT_BYTES_H2D"] - before["CNT_BYTES_H2D"]
                c.require(moved == nbytes, f"copying {nbytes} bytes moved {moved} bytes by DMA: the copy must go "
                          "through a DMA command, not through BAR1")
                want = -(-nbytes // PAGE)
                got = mid["CNT_DESCRIPTORS"] - before["CNT_DESCRIPTORS"]
                c.require(got == want, f"{nbytes} bytes took {got} descriptors; one per 4 KiB piece is {want}")
                c.require(np.array_equal(dev.vram_view[dva:dva + nbytes], data),
                          f"VRAM at {dva:#x} does not hold the {nbytes} bytes you copied (check lengths and offsets)")
                back = parts.copy_from_vram(drv, dva, nbytes)
                c.require(_same_bytes(back, data),  # values, not types: any array-like of the bytes
                          f"copy_from_vram returned different bytes for a {nbytes}-byte round trip")
            bells = dev.device_counters()["CNT_DOORBELLS"]
            for bad in (12, 0):
                _expect(c, ValueError, f"a {bad}-byte copy", parts.copy_to_vram, drv, np.zeros(bad, np.uint8), drv.first_dva)
            for bad in (-8, 12):
                _expect(c, ValueError, f"a {bad}-byte copy back", parts.copy_from_vram, drv, drv.first_dva, bad)
            c.require(dev.device_counters()["CNT_DOORBELLS"] == bells,
                      "a bad length rang the doorbell: check it before touching the device")
            try:  # staging buffers and descriptor lists must all have been freed
                dev.free_sys(dev.alloc_sys(dev.sys_view.size - 64 * 1024, align=8))
            except MemoryError:
                c.require(False, "system memory is leaking: free the staging buffer and the descriptor list "
                                 "after every copy (in a finally block)")


def _upload(dev: ToyGPU, dva: int, x: np.ndarray) -> None:
    dev.vram_view[dva:dva + x.nbytes] = x.view(np.uint8)  # identity-mapped: the DVA is the VRAM offset


def check_compute(c, parts: Parts) -> None:
    """Part 6: SAXPY on random vectors."""
    for seed in parts.seeds:
        rng = np.random.default_rng([6, seed])
        dev, drv = _ready(parts, seed)
        with dev:
            for n, a in ((1, 2.0), (1000, float(rng.normal())), (16384, 3.25)):
                x = rng.standard_normal(n).astype(np.float32)
                y = rng.standard_normal(n).astype(np.float32)
                xd, yd = vram_alloc(drv, 4 * n), vram_alloc(drv, 4 * n)
                _upload(dev, xd, x)
                _upload(dev, yd, y)
                parts.saxpy(drv, xd, yd, n, a)
                got = dev.vram_view[yd:yd + 4 * n].copy().view(np.float32)
                want = np.float32(a) * x + y
                c.require(np.allclose(got, want, rtol=1e-6, atol=1e-6),
                          f"saxpy with n={n}, a={a:.3g}: first values {got[:3]} instead of {want[:3]}")


def check_batching(c, parts: Parts) -> None:
    """Part 7: one doorbell per batch, in order, batch sizes checked against the ring."""
    for seed in parts.seeds:
        dev, drv = _ready(parts, seed)
        with dev:
            n = drv.entries
            dva = vram_alloc(drv, 64 * 8)
            seen = {}
            for batch in (1, n // 4, n - 1):
                cmds = [cmd.fill(dva + 8 * i, 8, batch * 1000 + i) for i in range(64)]
                before = dev.device_counters()["CNT_DOORBELLS"]
                rung = parts.run_batched(drv, cmds, batch)
                device = dev.device_counters()["CNT_DOORBELLS"] - before
                want = -(-64 // batch)
                c.require(device == want and rung == want,
                          f"64 commands in batches of {batch}: {device} doorbells reached the device and you "
                          f"reported {rung}; one per batch is {want}")
                vals = dev.vram_view[dva:dva + 64 * 8].copy().view("<u4")[::2]
                c.require(np.array_equal(vals, batch * 1000 + np.arange(64)),
                          f"with batches of {batch} some commands did not run (or ran out of order)")
                seen[batch] = device
            for bad in (0, n, 2.5):
                _expect(c, ValueError, f"run_batched with batch={bad!r} on a {n}-entry ring",
                        parts.run_batched, drv, cmds, bad)


def check_recovery(c, parts: Parts) -> None:
    """Part 8: after a device error, recover() says what happened and the driver works again,
    with VRAM and its mappings intact."""
    for seed in parts.seeds:
        rng = np.random.default_rng([8, seed])
        dev, drv = _ready(parts, seed)
        with dev:
            keep = vram_alloc(drv, 4096)
            data = rng.integers(0, 256, 4096, dtype=np.uint8)
            dev.vram_view[keep:keep + 4096] = data
            beyond = drv.pages * PAGE + PAGE * int(rng.integers(0, 8))
            v = parts.submit(drv, [cmd.fill(beyond, 8, 1), cmd.nop()])
            _expect(c, MemoryFaultError, "a FILL past the device's address space", parts.wait_fence, drv, v)
            got = parts.recover(drv)
            c.require(isinstance(got, (tuple, list)) and len(got) == 2, f"recover should return (code, info), got {got!r}")
            c.require(regs.ErrorCode(got[0]) is regs.ErrorCode.MMU_FAULT and got[1] == beyond,
                      f"recover returned {got!r}; the device recorded (MMU_FAULT, {beyond:#x})")
            _no_error(c, dev, "after recover")
            c.require(_status(dev) & regs.Status.RING_ON, "after recover the ring is not on")
            c.require(np.array_equal(dev.vram_view[keep:keep + 4096], data), "recover must not touch VRAM")
            for k in range(2 * drv.entries // 3):  # the driver works again, and its ring wraps
                v2 = parts.submit(drv, [cmd.fill(keep, 8, 100 + k)])
                parts.wait_fence(drv, v2, timeout=5.0)
            c.require(v2 > v, f"fence values must keep growing after recovery ({v} before, {v2} after)")
            c.require(int(dev.vram_view[keep:keep + 4].view("<u4")[0]) == 100 + k,
                      "after recover the commands did not run")
            c.require(dev.read("RING_HEAD") == drv.wptr,
                      f"the device's read pointer ({dev.read('RING_HEAD')}) and your write pointer ({drv.wptr}) "
                      "disagree after recovery: a reset starts the ring at 0")


CHECK_FUNCTIONS = {
    "identify_device": check_identify, "map_bar1": check_map_bar1, "bring_up": check_bring_up,
    "submit_and_wait": check_submit_and_wait, "dma_copies": check_dma_copies, "compute": check_compute,
    "batching": check_batching, "recovery": check_recovery,
}
