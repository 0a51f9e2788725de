"""A software model of TTM: buffer objects, placements, pinning, LRU eviction, move costs.

TTM (the kernel's Translation Table Manager, drivers/gpu/drm/ttm/) is the memory manager
under amdgpu, radeon, nouveau, xe, vmwgfx and qxl. It keeps every buffer object (BO) in one
*placement* at a time and moves it when a command submission needs it somewhere else:

===============================  ===========================================================
model                            kernel
===============================  ===========================================================
``Domain.SYSTEM/GTT/VRAM``       ``TTM_PL_SYSTEM`` 0, ``TTM_PL_TT`` 1, ``TTM_PL_VRAM`` 2
                                 (include/drm/ttm/ttm_placement.h)
``BufferObject.placements``      ``struct ttm_placement`` / ``struct ttm_place`` list; amdgpu
                                 builds it in ``amdgpu_bo_placement_from_domain``
``BufferObject.priority`` 0..3   ``bo->priority`` < ``TTM_MAX_BO_PRIORITY`` (4); one LRU list
                                 per priority, ``man->lru[]`` (include/drm/ttm/ttm_resource.h)
``TTMModel.touch``               ``ttm_bo_move_to_lru_tail`` (ttm_bo.c) / ``ttm_resource_move_to_lru_tail``
``TTMModel.validate``            ``ttm_bo_validate`` -> ``ttm_bo_alloc_resource`` (ttm_bo.c)
``TTMModel._evict_one``          ``ttm_bo_evict_alloc`` -> ``ttm_lru_walk_for_evict`` -> ``ttm_bo_evict_cb``
                                 -> ``ttm_bo_evict`` (ttm_bo.c, ttm_bo_util.c); before the 2024
                                 LRU-walker rework (commit 3756310e9fe1), ``ttm_mem_evict_first``
``TTMModel.pin`` / ``unpin``     ``ttm_bo_pin`` / ``ttm_bo_unpin``: a BO with ``bo->pin_count`` > 0
                                 leaves the LRU; ``ttm_resource_move_to_lru_tail`` (ttm_resource.c)
                                 parks it on the device's ``unevictable`` list, out of the walk
VRAM allocation                  ``amdgpu_vram_mgr_new`` -> ``drm_buddy_alloc_blocks`` (mainline
                                 since 2026: ``gpu_buddy_alloc_blocks``, drivers/gpu/buddy.c)
                                 (see :mod:`helpers.models.buddy`)
``TTMModel.use(..., job=)``      a command submission adds its job's ``dma_fence`` to every BO's
                                 reservation object (``dma_resv_add_fence``, drivers/dma-buf/dma-resv.c);
                                 ``signal`` is the fence signalling (``dma_fence_signal``)
evicting a busy BO waits         TTM waits for every fence of the victim's reservation object
                                 (``ttm_bo_wait_ctx``: ``DMA_RESV_USAGE_BOOKKEEP``, i.e. all of them)
                                 or queues the copy behind them; ``no_wait_gpu=True`` is
                                 ``ctx->no_wait_gpu``: the wait is refused with -EBUSY and
                                 ``ttm_lru_walk_for_evict`` skips the busy BO for the next one; with
                                 none left, validation moves on to the next placement
GTT <-> SYSTEM moves cost 0      both are system pages; ``amdgpu_bo_move`` (amdgpu_ttm.c) only
                                 binds/unbinds them in the GART (``amdgpu_ttm_backend_bind``,
                                 then ``ttm_bo_move_null``), no copy
VRAM <-> GTT/SYSTEM moves        a copy over the link by the GPU's copy engine
                                 (``amdgpu_move_blit``); cost from :class:`LinkModel`. amdgpu
                                 bounces VRAM<->SYSTEM through GTT (-EMULTIHOP): same one copy
===============================  ===========================================================

Simplifications, all stated on figures as "a software model": one desired placement per BO
and the rest as fallbacks (the kernel's TTM_PL_FLAG_DESIRED / TTM_PL_FLAG_FALLBACK two
passes are collapsed into "desired with eviction, then fallbacks in order"); a move is
instantaneous in model time and its cost is *accounted*, not waited for. Fences are modelled only
as far as eviction needs them: a BO is *busy* while a job that used it has not signalled, and
evicting a busy BO records a wait for those jobs and then treats them as signalled (a dma_fence must
signal in finite time). The kernel does not always block the CPU there: a driver that moves with
its copy engine (amdgpu's ``amdgpu_move_blit``) queues the copy behind the fences and frees the old
memory when the copy's own fence signals (``ttm_bo_move_accel_cleanup``); a CPU copy
(``ttm_bo_move_memcpy``) or a BO with nowhere to go (``ttm_bo_evict`` -> ``ttm_bo_wait_ctx``) waits.
Fence usage classes (KERNEL/WRITE/READ/BOOKKEEP), a CPU mapping's wait, delayed destruction of a
busy BO (the model frees at once) and the dmem cgroup's protection in the walk
(``dmem_cgroup_state_evict_valuable``, Linux 6.14+) are left out. No
amdgpu move throttling (``amdgpu_cs_get_threshold_for_moves``); BOs of the submission being
validated are not evictable (the kernel's ww_mutex reservation has the same effect).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from helpers.core import validate
from helpers.core.errors import InputError, InputTypeError
from helpers.models.buddy import BuddyAllocator, OutOfSpace

MiB = 1 << 20
GiB = 1 << 30
TTM_MAX_BO_PRIORITY = 4


class Domain(IntEnum):
    """Where a BO's pages live; the numbers are TTM's memory types (ttm_placement.h)."""

    SYSTEM = 0  # TTM_PL_SYSTEM: ordinary pages, not reachable by the GPU
    GTT = 1  # TTM_PL_TT: system pages bound into the GPU's GART, reachable over PCIe
    VRAM = 2  # TTM_PL_VRAM: device memory, managed by drm_buddy

    def __str__(self) -> str:
        return self.name


# --------------------------------------------------------------------------------------------
# Move costs
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkModel:
    """Cost of one copy over the CPU-GPU link: latency + bytes / bandwidth, per direction.

    ``from_sweep`` takes the parameters from a real sweep (pinned host memory, copies timed
    by CUDA events, fitted with the course's copy-cost model); the moves that use them are
    simulated.
    """

    latency_s: float
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    source: str = "assumed parameters"

    def __post_init__(self):
        for name in ("latency_s", "h2d_bytes_per_s", "d2h_bytes_per_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v >= 0 or (name != "latency_s" and v == 0):
                raise InputError(f"LinkModel.{name} must be a positive number, got {v!r}")

    @classmethod
    def from_sweep(cls, data: dict, source: str = "a recorded copy sweep") -> LinkModel:
        """Fit from the data of experiment ``transfers.pinned_vs_pageable`` (an Evidence's data).

        The course's copy-cost model (helpers.models.copy_cost) is fitted to the pinned h2d and
        d2h series over all their sizes, as Chapter 3 fits them: bandwidth per direction is the
        fitted B, latency the mean of the two fitted t0. A sweep without both pinned series is
        a ModelInputError naming the missing one.
        """
        from helpers.models import copy_cost

        fits = {d: copy_cost.fit_series(copy_cost.series_for(data, "pinned", d)) for d in ("h2d", "d2h")}
        latency = (fits["h2d"].t0_s + fits["d2h"].t0_s) / 2
        return cls(latency, fits["h2d"].bandwidth_Bps, fits["d2h"].bandwidth_Bps, f"pinned-copy fit of {source}")

    def move_seconds(self, nbytes: int, src: Domain, dst: Domain) -> float:
        """Modelled time of moving ``nbytes`` from ``src`` to ``dst`` (0 when no copy is needed)."""
        if link_bytes(nbytes, src, dst) == 0:
            return 0.0
        bw = self.h2d_bytes_per_s if dst is Domain.VRAM else self.d2h_bytes_per_s
        return self.latency_s + nbytes / bw


def link_bytes(nbytes: int, src: Domain | None, dst: Domain) -> int:
    """Bytes a move sends over the link: only moves into or out of VRAM copy data."""
    if src is None or src == dst:
        return 0
    return nbytes if Domain.VRAM in (src, dst) else 0


# --------------------------------------------------------------------------------------------
# Buffer objects and the model
# --------------------------------------------------------------------------------------------
@dataclass(eq=False)
class BufferObject:
    """A TTM buffer object: size, allowed placements (desired first), priority, pinning."""

    name: str
    size: int
    placements: tuple[Domain, ...] = (Domain.VRAM, Domain.GTT)
    priority: int = 0
    contiguous: bool = False
    domain: Domain | None = None
    pin_count: int = 0
    last_use: int = -1
    blocks: list = field(default_factory=list, repr=False)
    fences: set[str] = field(default_factory=set)

    @property
    def pinned(self) -> bool:
        return self.pin_count > 0

    @property
    def busy(self) -> bool:
        """True while a job that used this BO has not signalled its fence."""
        return bool(self.fences)


@dataclass(frozen=True)
class Move:
    """One move the model made: which BO, from where to where, why, and its modelled cost."""

    step: int
    bo: str
    src: Domain | None
    dst: Domain
    nbytes: int
    link_bytes: int
    seconds: float
    reason: str  # "evict", "validate" (to the desired placement), "fallback", "create"
    waited_for: tuple[str, ...] = ()  # jobs whose fences this eviction had to wait for


#: An eviction policy chooses the victim among candidates given in TTM's walk order
#: (priority 0 first, least recently used first within a priority).
Policy = Callable[[Sequence[BufferObject], int, "TTMModel"], BufferObject]


def lru_policy(candidates: Sequence[BufferObject], needed: int, model: TTMModel) -> BufferObject:
    """TTM's own choice: the first BO of the walk (lowest priority, least recently used)."""
    return candidates[0]


def largest_policy(candidates: Sequence[BufferObject], needed: int, model: TTMModel) -> BufferObject:
    """Within the lowest priority present, the largest BO (fewest evictions, more bytes)."""
    lowest = candidates[0].priority
    return max((c for c in candidates if c.priority == lowest), key=lambda c: (c.size, -c.last_use))


def random_policy(candidates: Sequence[BufferObject], needed: int, model: TTMModel) -> BufferObject:
    """Within the lowest priority present, a victim drawn from the model's seeded generator."""
    lowest = candidates[0].priority
    pool = [c for c in candidates if c.priority == lowest]
    return pool[model.rng.randrange(len(pool))]


# Lab 4 asks the learner for a better policy than these; its reference is instructor-only.
POLICIES: dict[str, Policy] = {"lru": lru_policy, "largest": largest_policy, "random": random_policy}


class TTMModel:
    """VRAM (a drm_buddy allocator), GTT (a byte budget) and SYSTEM (unbounded), with eviction."""

    def __init__(self, vram_bytes: int, gtt_bytes: int, *, chunk_size: int = 64 * 1024,
                 link: LinkModel | None = None, policy: str | Policy = "lru", seed: int = 0,
                 no_wait_gpu: bool = False):
        vram_bytes = validate.byte_size(vram_bytes, "vram_bytes")
        gtt_bytes = validate.byte_size(gtt_bytes, "gtt_bytes")
        self.vram = BuddyAllocator(vram_bytes, chunk_size)
        self.gtt_bytes = gtt_bytes
        self.gtt_used = 0
        self.link = link or LinkModel(5e-6, 25e9, 25e9, "assumed 25 GB/s, 5 us")
        self.policy_name, self.policy = _resolve_policy(policy)
        self.rng = random.Random(seed)
        self.no_wait_gpu = validate.flag(no_wait_gpu, "no_wait_gpu")
        self.bos: dict[str, BufferObject] = {}
        self.moves: list[Move] = []
        self.step = 0
        self._clock = 0
        self._reserved: set[str] = set()

    # bookkeeping ---------------------------------------------------------------------------
    def used(self, domain: Domain) -> int:
        """Bytes held in ``domain`` (VRAM counts whole buddy blocks, as the kernel does)."""
        if domain is Domain.VRAM:
            return self.vram.size - self.vram.avail
        if domain is Domain.GTT:
            return self.gtt_used
        return sum(b.size for b in self.bos.values() if b.domain is Domain.SYSTEM)

    def touch(self, bo: BufferObject) -> None:
        """Move ``bo`` to the tail of its LRU list (ttm_bo_move_to_lru_tail)."""
        bo.last_use = self._clock
        self._clock += 1

    def lru(self, domain: Domain) -> list[BufferObject]:
        """Evictable BOs of ``domain`` in TTM's walk order: priority 0 first, then LRU first."""
        c = [b for b in self.bos.values() if b.domain is domain and not b.pinned and b.name not in self._reserved]
        return sorted(c, key=lambda b: (b.priority, b.last_use))

    # placing --------------------------------------------------------------------------------
    def _try_place(self, bo: BufferObject, domain: Domain) -> bool:
        if domain is Domain.VRAM:
            try:
                bo.blocks = self.vram.alloc(_round_up(bo.size, self.vram.chunk_size), contiguous=bo.contiguous)
            except OutOfSpace:
                return False
            return True
        if domain is Domain.GTT:
            if self.gtt_used + bo.size > self.gtt_bytes:
                return False
            self.gtt_used += bo.size
        return True

    def _release(self, bo: BufferObject) -> None:
        if bo.domain is Domain.VRAM:
            self.vram.free(bo.blocks)
            bo.blocks = []
        elif bo.domain is Domain.GTT:
            self.gtt_used -= bo.size
        bo.domain = None

    def _evict_one(self, domain: Domain, needed: int) -> bool:
        cands = self.lru(domain)
        if self.no_wait_gpu:  # ttm_bo_wait_ctx answers -EBUSY, and ttm_lru_walk_for_evict skips the BO
            cands = [c for c in cands if not c.busy]
        if not cands:
            return False
        victim = self.policy(cands, needed, self)
        if victim not in cands:
            raise InputError(f"policy {self.policy_name!r} returned {getattr(victim, 'name', victim)!r}, "
                             "which is not one of the eviction candidates")
        waited = self._wait_idle(victim)
        # ttm_bo_evict: the driver's evict_flags choose the destination; VRAM goes to GTT
        # when GTT has room (making room there by pushing GTT BOs to SYSTEM), else SYSTEM.
        if domain is Domain.VRAM:
            dst = Domain.SYSTEM
            if Domain.GTT in victim.placements:
                while self.gtt_used + victim.size > self.gtt_bytes and self._evict_one(Domain.GTT, victim.size):
                    pass
                if self.gtt_used + victim.size <= self.gtt_bytes:
                    dst = Domain.GTT
        else:
            dst = Domain.SYSTEM
        if dst is Domain.GTT:
            self.gtt_used += victim.size
            blocks = victim.blocks
            self.vram.free(blocks)
            victim.blocks = []
            src = victim.domain
            victim.domain = dst
            self.moves.append(Move(self.step, victim.name, src, dst, victim.size, link_bytes(victim.size, src, dst),
                                   self.link.move_seconds(victim.size, src, dst), "evict", waited))
        else:
            src = victim.domain
            self._release(victim)
            victim.domain = Domain.SYSTEM
            self.moves.append(Move(self.step, victim.name, src, dst, victim.size, link_bytes(victim.size, src, dst),
                                   self.link.move_seconds(victim.size, src, dst), "evict", waited))
        return True

    def _place_with_eviction(self, bo: BufferObject, domain: Domain) -> bool:
        while not self._try_place(bo, domain):
            if domain is Domain.SYSTEM or not self._evict_one(domain, bo.size):
                return False
        return True

    def validate(self, bo: BufferObject) -> Domain:
        """Put ``bo`` in its desired placement, evicting LRU BOs if needed; else a fallback.

        Returns where the BO ends up. A pinned BO never moves.
        """
        if bo.pinned or bo.domain is bo.placements[0]:
            return bo.domain
        for i, dom in enumerate(bo.placements):
            if dom is bo.domain:  # already in the best placement we can reach
                return dom
            old = bo.domain
            old_blocks = bo.blocks
            if self._place_with_eviction(bo, dom):
                new_blocks = bo.blocks
                bo.blocks = old_blocks
                bo.domain = old
                self._move_into(bo, dom, new_blocks, "create" if old is None else ("validate" if i == 0 else "fallback"))
                return dom
            bo.blocks = old_blocks
        raise OutOfSpace(f"{bo.name}: no allowed placement {list(map(str, bo.placements))} has room")

    def _move_into(self, bo: BufferObject, dst: Domain, new_blocks: list, reason: str) -> None:
        src = bo.domain
        if src is Domain.VRAM:
            self.vram.free(bo.blocks)
        elif src is Domain.GTT:
            self.gtt_used -= bo.size
        bo.blocks = new_blocks if dst is Domain.VRAM else []
        bo.domain = dst
        if src is not None:
            self.moves.append(Move(self.step, bo.name, src, dst, bo.size, link_bytes(bo.size, src, dst),
                                   self.link.move_seconds(bo.size, src, dst), reason))

    # the public operations -------------------------------------------------------------------
    def create(self, name: str, size: int, placements: Sequence[Domain] = (Domain.VRAM, Domain.GTT),
               priority: int = 0, contiguous: bool = False) -> BufferObject:
        """Create a BO and place it (amdgpu_bo_create -> ttm_bo_init_reserved -> ttm_bo_validate)."""
        if not isinstance(name, str) or not name:
            raise InputError(f"name must be a non-empty str, got {name!r}")
        if name in self.bos:
            raise InputError(f"a BO named {name!r} already exists")
        size = validate.byte_size(size, "size")
        placements = tuple(Domain(p) for p in placements)
        if not placements or len(set(placements)) != len(placements):
            raise InputError(f"placements must be a non-empty list of distinct domains, got {placements}")
        priority = validate.whole_number(priority, "priority (below TTM_MAX_BO_PRIORITY)", 0, TTM_MAX_BO_PRIORITY - 1)
        if contiguous and Domain.VRAM not in placements:
            raise InputError("contiguous only applies to BOs that may live in VRAM")
        bo = BufferObject(name, _round_up(size, 4096), placements, priority, contiguous)
        self.bos[name] = bo
        self._reserved = {name}
        try:
            self.validate(bo)
        except OutOfSpace:
            del self.bos[name]
            raise
        finally:
            self._reserved = set()
        self.touch(bo)
        return bo

    def use(self, names: Sequence[str], job: str | None = None) -> None:
        """One command submission that references ``names``: validate each, touch each.

        With ``job`` (a name for the submission), the job's fence is added to every BO's
        reservation object, as a driver does after pushing the job (``dma_resv_add_fence``):
        the BOs stay busy until :meth:`signal` says the job finished.
        """
        if job is not None:
            job = validate.text(job, "job (a name for the submission)")
        bos = [self._get(n) for n in names]
        self._reserved = {b.name for b in bos}
        try:
            for bo in bos:
                self.validate(bo)
                self.touch(bo)
        finally:
            self._reserved = set()
        if job is not None:
            for bo in bos:
                bo.fences.add(job)

    def signal(self, job: str) -> list[str]:
        """The GPU finished ``job``: its fence signals (``dma_fence_signal``) for every BO it used.

        Returns the names of the BOs that carried it. A job no BO carries is an InputError (a
        typo, or a job already signalled).
        """
        job = validate.text(job, "job")
        carried = [b.name for b in self.bos.values() if job in b.fences]
        if not carried:
            raise InputError(f"no BO is waiting for job {job!r} (never submitted, or already signalled)")
        for name in carried:
            self.bos[name].fences.discard(job)
        return carried

    def busy(self, name: str) -> tuple[str, ...]:
        """The jobs whose fences BO ``name`` still carries (empty: idle)."""
        return tuple(sorted(self._get(name).fences))

    def _wait_idle(self, bo: BufferObject) -> tuple[str, ...]:
        """Wait until ``bo`` is idle: every job it carries signals (in finite time, as a dma_fence must)."""
        waited = tuple(sorted(bo.fences))
        for job in waited:
            self.signal(job)
        return waited

    def pin(self, name: str) -> None:
        """Validate into the desired placement and pin there (ttm_bo_pin): never evicted.

        As amdgpu_bo_pin does, this fails (OutOfSpace, nothing pinned) when the BO cannot be
        placed in its desired domain; it is not pinned in a fallback.
        """
        bo = self._get(name)
        self._reserved = {name}
        try:
            self.validate(bo)
        finally:
            self._reserved = set()
        if bo.domain is not bo.placements[0]:
            raise OutOfSpace(f"cannot pin {name!r} in {bo.placements[0]}: no room even after eviction")
        bo.pin_count += 1

    def unpin(self, name: str) -> None:
        """Drop one pin (ttm_bo_unpin); the BO returns to the LRU tail."""
        bo = self._get(name)
        if not bo.pinned:
            raise InputError(f"{name!r} is not pinned")
        bo.pin_count -= 1
        self.touch(bo)

    def destroy(self, name: str) -> None:
        """Free a BO's memory wherever it is (ttm_bo_put -> ttm_bo_release)."""
        bo = self._get(name)
        if bo.pinned:
            raise InputError(f"{name!r} is pinned; unpin it before destroying it")
        self._release(bo)
        del self.bos[name]

    def _get(self, name: str) -> BufferObject:
        try:
            return self.bos[name]
        except KeyError:
            raise InputError(f"no BO named {name!r}") from None

    # totals ------------------------------------------------------------------------------------
    def totals(self) -> dict:
        """Evictions, moves, bytes over the link and modelled seconds so far."""
        ev = [m for m in self.moves if m.reason == "evict"]
        return {"evictions": len(ev), "moves": len(self.moves),
                "evictions_that_waited": sum(1 for m in ev if m.waited_for),
                "link_bytes": sum(m.link_bytes for m in self.moves),
                "evicted_bytes": sum(m.nbytes for m in ev),
                "seconds": sum(m.seconds for m in self.moves)}


def move_rows(model: TTMModel) -> list[tuple]:
    """One row per move the model made: step, BO, from, to, why, and the jobs it waited for."""
    return [(mv.step, mv.bo, str(mv.src), str(mv.dst), mv.reason, ", ".join(mv.waited_for) or "-")
            for mv in model.moves]


def bo_rows(model: TTMModel) -> list[tuple[str, str, str, str]]:
    """One row per BO: where it is, what moved it (and which fences each move waited for), and the
    fences it still carries."""
    rows = []
    for name, bo in sorted(model.bos.items()):
        moved = [f"{mv.reason} {mv.src}→{mv.dst}" + (f" after waiting for {', '.join(mv.waited_for)}"
                                                     if mv.waited_for else "")
                 for mv in model.moves if mv.bo == name]
        rows.append((name, str(bo.domain), "; ".join(moved) or "not moved", ", ".join(sorted(bo.fences)) or "none"))
    return rows


def _round_up(n: int, a: int) -> int:
    return -(-n // a) * a


def _resolve_policy(policy: str | Policy) -> tuple[str, Policy]:
    if isinstance(policy, str):
        try:
            return policy, POLICIES[policy]
        except KeyError:
            raise InputError(f"unknown policy {policy!r}; choose one of {sorted(POLICIES)} or pass a function") from None
    if callable(policy):
        return getattr(policy, "__name__", "custom"), policy
    raise InputTypeError(f"policy must be a name or a function, got {type(policy).__name__}")


# --------------------------------------------------------------------------------------------
# Workloads and runs
# --------------------------------------------------------------------------------------------
WORKLOADS = ("fits", "hot-cold", "cyclic", "scanout")


def workload(name: str, vram_bytes: int, *, steps: int = 200, seed: int = 1) -> list[tuple]:
    """A deterministic list of operations for a VRAM of ``vram_bytes``.

    ``("create", name, size, placements, priority, contiguous)``, ``("pin", name)``,
    ``("use", [names])`` (``simulate`` also takes ``("use", [names], job)`` and
    ``("signal", job)``), ``("destroy", name)``. Sizes are multiples of 64 KiB between
    1/64 and 1/8 of VRAM. The same (name, vram_bytes, steps, seed) gives the same list.

    * fits      working set about 60 % of VRAM: after warm-up, nothing moves;
    * hot-cold  working set 150 % of VRAM, 80 % of uses go to a 20 % hot set;
    * cyclic    working set 130 % of VRAM used in a fixed round-robin order (LRU's worst case);
    * scanout   pinned contiguous framebuffers plus short-lived BOs of mixed sizes, which
      fragment VRAM (watch the fragmentation curve).
    """
    if name not in WORKLOADS:
        raise InputError(f"unknown workload {name!r}; choose one of {WORKLOADS}")
    vram_bytes = validate.byte_size(vram_bytes, "vram_bytes (4 MiB or more)", 64 * 64 * 1024)
    steps = validate.whole_number(steps, "steps", lo=1)
    rng = random.Random(f"{name}:{vram_bytes}:{steps}:{seed}")
    unit = 64 * 1024
    lo, hi = max(1, vram_bytes // 64 // unit), max(1, vram_bytes // 8 // unit)

    def size() -> int:
        return rng.randint(lo, hi) * unit

    ops: list[tuple] = []
    vr = (Domain.VRAM, Domain.GTT)
    if name in ("fits", "hot-cold", "cyclic"):
        target = {"fits": 0.6, "hot-cold": 1.5, "cyclic": 1.3}[name] * vram_bytes
        names, total = [], 0
        while total < target:
            s = size()
            n = f"bo{len(names)}"
            prio = 1 if rng.random() < 0.1 else 0  # a few higher-priority BOs (page tables, rings)
            ops.append(("create", n, s, vr, prio, False))
            names.append(n)
            total += s
        hot = names[: max(1, len(names) // 5)]
        for i in range(steps):
            if name == "cyclic":
                k = 3
                ops.append(("use", [names[(i * k + j) % len(names)] for j in range(k)]))
            elif name == "hot-cold":
                ops.append(("use", [rng.choice(hot) if rng.random() < 0.8 else rng.choice(names) for _ in range(3)]))
            else:
                ops.append(("use", rng.sample(names, min(3, len(names)))))
        return ops
    # scanout: two pinned framebuffers, then churn of short-lived BOs
    fb = _round_up(vram_bytes // 10, unit)
    for i in range(2):
        ops.append(("create", f"fb{i}", fb, (Domain.VRAM,), 3, True))
        ops.append(("pin", f"fb{i}"))
    live: list[str] = []
    for i in range(steps):
        if live and (rng.random() < 0.45 or len(live) > 12):
            ops.append(("destroy", live.pop(rng.randrange(len(live)))))
        n = f"tmp{i}"
        contiguous = rng.random() < 0.3
        ops.append(("create", n, size(), vr, 0, contiguous))
        live.append(n)
        ops.append(("use", [n] + rng.sample(live[:-1], min(2, len(live) - 1))))
    return ops


@dataclass
class Run:
    """The outcome of :func:`simulate`: per-step timeline, every move, and totals."""

    workload: str
    policy: str
    vram_bytes: int
    gtt_bytes: int
    seed: int
    link: LinkModel
    timeline: list[dict]
    moves: list[Move]
    totals: dict
    failures: int


def simulate(ops: Sequence[tuple] | str, vram_bytes: int, gtt_bytes: int | None = None, *,
             policy: str | Policy = "lru", link: LinkModel | None = None, seed: int = 1,
             steps: int = 200, chunk_size: int = 64 * 1024, no_wait_gpu: bool = False) -> Run:
    """Run a workload (a name from WORKLOADS, or a list of ops) through a fresh TTMModel.

    A step is one operation; the timeline records after each: VRAM and GTT bytes in use,
    VRAM fragmentation, cumulative evictions, bytes over the link and modelled seconds.
    An operation that finds no room anywhere is counted in ``failures`` and skipped.
    """
    name = ops if isinstance(ops, str) else "custom"
    if isinstance(ops, str):
        ops = workload(ops, vram_bytes, steps=steps, seed=seed)
    if gtt_bytes is None:
        gtt_bytes = vram_bytes
    m = TTMModel(vram_bytes, gtt_bytes, chunk_size=chunk_size, link=link, policy=policy, seed=seed,
                 no_wait_gpu=no_wait_gpu)
    timeline, failures = [], 0
    ev = lb = 0
    secs = 0.0
    for i, op in enumerate(ops):
        m.step = i
        before = len(m.moves)
        kind = op[0]
        try:
            if kind == "create":
                m.create(*op[1:])
            elif kind == "use":
                m.use(op[1], *op[2:3])
            elif kind == "signal":
                m.signal(op[1])
            elif kind == "pin":
                m.pin(op[1])
            elif kind == "unpin":
                m.unpin(op[1])
            elif kind == "destroy":
                m.destroy(op[1])
            else:
                raise InputError(f"operation {i}: unknown kind {kind!r}")
        except OutOfSpace:
            failures += 1
        for mv in m.moves[before:]:
            ev += mv.reason == "evict"
            lb += mv.link_bytes
            secs += mv.seconds
        timeline.append({"step": i, "op": kind, "vram_used": m.used(Domain.VRAM), "gtt_used": m.used(Domain.GTT),
                         "fragmentation": m.vram.fragmentation(), "evictions": ev, "link_bytes": lb,
                         "seconds": secs})
    return Run(name, m.policy_name, m.vram.size, gtt_bytes, seed, m.link, timeline, m.moves, m.totals(), failures)


def compare(workload_name: str, vram_bytes: int, policies: Sequence[str | Policy] = ("lru", "largest", "random"),
            *, seed: int = 1, steps: int = 200, link: LinkModel | None = None) -> list[Run]:
    """The same workload under several policies (for a table or a bar chart)."""
    return [simulate(workload_name, vram_bytes, policy=p, seed=seed, steps=steps, link=link) for p in policies]


# --------------------------------------------------------------------------------------------
# Driving the model with a real kernel's sequence (Chapter 6, part 2; Lab 4)
# --------------------------------------------------------------------------------------------
def scanout_flips(flips: Sequence[int], buffer_bytes: int, vram_bytes: int, *,
                  policy: str | Policy = "lru") -> list[dict]:
    """The model run on a display's flip sequence, as DRM's VRAM helper drives real TTM.

    Each flip shows buffer ``flips[i]``: the kernel pins it in VRAM for scanout, evicting if
    needed, then unpins the buffer shown before, which goes to the LRU tail (``ttm_bo_unpin``).
    In the kernel lab's Linux 6.1, the function trace of a flip on bochs shows
    ``drm_gem_vram_pin <- drm_gem_vram_plane_helper_prepare_fb`` then
    ``drm_gem_vram_unpin <- drm_gem_vram_simple_display_pipe_cleanup_fb``. Buffers start outside VRAM (the
    helper creates them in system memory) and are evicted to system memory. One entry per
    flip: ``{"step", "show", "evicted": [buffer indices], "resident": [buffer indices]}``.

    VRAM here is the model's buddy allocator, not the kernel's drm_mm range manager; with equal
    buffer sizes both need exactly one eviction per missing buffer once VRAM is full.
    """
    buffer_bytes = validate.byte_size(buffer_bytes, "buffer_bytes")
    m = TTMModel(vram_bytes, vram_bytes, chunk_size=4096, policy=policy)
    out, shown = [], None
    for step, b in enumerate(flips):
        b = validate.whole_number(b, f"flips[{step}] (a buffer index)", lo=0)
        m.step = step
        before = len(m.moves)
        name = f"fb{b}"
        if name not in m.bos:
            m.create(name, buffer_bytes, (Domain.VRAM, Domain.SYSTEM))
        m.pin(name)
        if shown is not None:
            m.unpin(shown)
        shown = name
        evicted = [int(mv.bo[2:]) for mv in m.moves[before:] if mv.reason == "evict"]
        resident = sorted(int(n[2:]) for n, bo in m.bos.items() if bo.domain is Domain.VRAM)
        out.append({"step": step, "show": b, "evicted": evicted, "resident": resident})
    return out
