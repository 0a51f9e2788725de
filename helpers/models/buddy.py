"""A software model of the kernel's drm_buddy allocator (drivers/gpu/drm/drm_buddy.c).

Where the source is: Linux 6.x (the course's GPU machine runs 6.18) has it in
drivers/gpu/drm/drm_buddy.c with include/drm/drm_buddy.h. In 2026 mainline moved it one level
up, to drivers/gpu/buddy.c and include/linux/gpu_buddy.h, renamed ``gpu_buddy_*``
(``gpu_buddy_alloc_blocks`` ...), and it keeps free blocks in per-order red-black trees, one
set for cleared and one for dirty blocks, where 6.x kept sorted lists. The names below are
the 6.x ones.

drm_buddy manages a device's VRAM for amdgpu (amdgpu_vram_mgr.c), i915 and xe: VRAM is a forest of power-of-two blocks; allocation takes a free block of the
smallest sufficient order and splits it in halves until it has the order it needs; freeing
merges a block with its *buddy* (the other half of its parent) while the buddy is free.
The model follows the kernel's functions one for one, so its behaviour can be read next to
the source:

===========================  ==========================================================
model                        kernel (drivers/gpu/drm/drm_buddy.c, include/drm/drm_buddy.h)
===========================  ==========================================================
``BuddyAllocator(size, c)``  ``drm_buddy_init``: size rounded down to the chunk size,
                             split into ``hweight64(size)`` power-of-two roots
``_split``                   ``split_block``: two children, parent marked split
``_from_freelist``           ``alloc_from_freelist``: smallest order with a free block,
                             the last (highest-offset) entry, split taking ``right``;
                             ``topdown`` is ``get_maxblock`` (DRM_BUDDY_TOPDOWN_ALLOCATION)
``alloc``                    ``drm_buddy_alloc_blocks``: a size that is not a power of two
                             becomes several blocks, largest first, falling back to
                             smaller orders down to ``min_block_size``;
                             ``contiguous`` rounds up to a power of two and trims
                             (DRM_BUDDY_CONTIGUOUS_ALLOCATION + ``drm_buddy_block_trim``)
``free_block`` / ``free``    ``drm_buddy_free_block`` / ``__drm_buddy_free`` (merging)
                             and ``drm_buddy_free_list``
===========================  ==========================================================

Not modelled: range-restricted allocation (``alloc_range_bias``, used for CPU-visible VRAM),
the contiguous "try harder" path, and the clear/dirty tracking of newer kernels. Offsets and
sizes are in bytes. The model is a simulation, and figures made from it say so.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field

from helpers.core import validate
from helpers.core.errors import CourseError, InputError, InputTypeError

FREE, SPLIT, ALLOCATED, DEAD = "free", "split", "allocated", "merged away"


class OutOfSpace(CourseError):
    """No free block can satisfy the request (the kernel's -ENOSPC); TTM then evicts."""


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _ilog2(n: int) -> int:
    return n.bit_length() - 1


@dataclass(eq=False, kw_only=True)
class Block:
    """One node of the buddy tree (struct drm_buddy_block): offset, order, state, links."""

    offset: int
    order: int
    chunk_size: int
    parent: Block | None = field(default=None, repr=False)
    state: str = FREE
    left: Block | None = field(default=None, repr=False)
    right: Block | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        """Bytes covered: chunk_size << order (drm_buddy_block_size)."""
        return self.chunk_size << self.order

    @property
    def end(self) -> int:
        return self.offset + self.size

    def buddy(self) -> Block | None:
        """The other half of this block's parent, or None for a root (__get_buddy)."""
        p = self.parent
        if p is None:
            return None
        return p.right if p.left is self else p.left


class BuddyAllocator:
    """A drm_buddy-style allocator over ``size`` bytes in units of ``chunk_size`` bytes."""

    def __init__(self, size: int, chunk_size: int = 4096):
        size = validate.whole_number(size, "size", lo=1)
        chunk_size = validate.whole_number(chunk_size, "chunk_size", lo=1)
        if not _is_pow2(chunk_size):
            raise InputError(f"chunk_size must be a power of two, got {chunk_size}")
        if size < chunk_size:
            raise InputError(f"size ({size}) must be at least chunk_size ({chunk_size})")
        size -= size % chunk_size  # round_down(size, chunk_size)
        self.size = size
        self.chunk_size = chunk_size
        self.avail = size
        self.max_order = _ilog2(size) - _ilog2(chunk_size)
        self.free_lists: list[list[Block]] = [[] for _ in range(self.max_order + 1)]
        self.roots: list[Block] = []
        offset, left = 0, size
        while left:  # one root per set bit of size, largest first
            order = _ilog2(left) - _ilog2(chunk_size)
            root = Block(offset=offset, order=order, chunk_size=chunk_size)
            self._mark_free(root)
            self.roots.append(root)
            offset += root.size
            left -= root.size

    # free-list bookkeeping (list_insert_sorted / list_del) ---------------------------------
    def _mark_free(self, b: Block) -> None:
        b.state = FREE
        insort(self.free_lists[b.order], b, key=lambda x: x.offset)

    def _unlist(self, b: Block) -> None:
        lst = self.free_lists[b.order]
        i = bisect_left(lst, b.offset, key=lambda x: x.offset)
        if i >= len(lst) or lst[i] is not b:
            raise AssertionError(f"block at {b.offset:#x} order {b.order} is not on its free list")
        del lst[i]

    def _split(self, b: Block) -> None:
        if b.state != FREE or b.order == 0:
            raise AssertionError("only a free block of order > 0 can be split")
        half = b.chunk_size << (b.order - 1)
        b.left = Block(offset=b.offset, order=b.order - 1, chunk_size=b.chunk_size, parent=b)
        b.right = Block(offset=b.offset + half, order=b.order - 1, chunk_size=b.chunk_size, parent=b)
        self._mark_free(b.left)
        self._mark_free(b.right)
        self._unlist(b)
        b.state = SPLIT

    def _mark_allocated(self, b: Block) -> None:
        self._unlist(b)
        b.state = ALLOCATED
        self.avail -= b.size

    # allocation -----------------------------------------------------------------------------
    def _from_freelist(self, order: int, topdown: bool) -> Block:
        block = None
        if topdown:  # get_maxblock: the highest-offset block of any sufficient order
            for o in range(order, self.max_order + 1):
                if self.free_lists[o] and (block is None or self.free_lists[o][-1].offset > block.offset):
                    block = self.free_lists[o][-1]
        else:
            for o in range(order, self.max_order + 1):
                if self.free_lists[o]:
                    block = self.free_lists[o][-1]
                    break
        if block is None:
            raise OutOfSpace(f"no free block of order >= {order}")
        while block.order != order:
            self._split(block)
            block = block.right
        return block

    def alloc(self, size: int, *, min_block_size: int | None = None, contiguous: bool = False,
              topdown: bool = False) -> list[Block]:
        """Allocate ``size`` bytes as a list of blocks (drm_buddy_alloc_blocks).

        ``size`` must be a multiple of the chunk size. Without ``contiguous`` the result may
        be several blocks anywhere in VRAM (what amdgpu's VRAM manager accepts for most
        buffers); with it, one physically contiguous range. Raises :class:`OutOfSpace`
        and leaves the allocator unchanged when the request cannot be met.
        """
        size = validate.whole_number(size, "size", lo=1)
        if size % self.chunk_size:
            raise InputError(f"size {size} is not a multiple of the chunk size {self.chunk_size}")
        if min_block_size is None:
            min_block_size = self.chunk_size
        min_block_size = validate.whole_number(min_block_size, "min_block_size", lo=1)
        if not _is_pow2(min_block_size) or min_block_size < self.chunk_size:
            raise InputError(f"min_block_size must be a power of two >= chunk size, got {min_block_size}")
        if size > self.size:
            raise OutOfSpace(f"{size} bytes requested from a {self.size}-byte allocator")
        original = size
        if contiguous:
            size = 1 << (size - 1).bit_length()  # roundup_pow_of_two
            min_block_size = size
        elif size % min_block_size:
            size += min_block_size - size % min_block_size
        if contiguous and size > (self.chunk_size << self.max_order):
            raise OutOfSpace(f"no block of {size} bytes can exist in this allocator")
        pages = size // self.chunk_size
        order = _ilog2(pages)
        min_order = _ilog2(min_block_size) - _ilog2(self.chunk_size)
        allocated: list[Block] = []
        while True:
            order = min(order, _ilog2(pages))
            while True:
                try:
                    block = self._from_freelist(order, topdown)
                    break
                except OutOfSpace:
                    if order == min_order:
                        self.free(allocated)
                        raise OutOfSpace(f"cannot allocate {original} bytes "
                                         f"({'contiguous, ' if contiguous else ''}{self.avail} free, "
                                         f"largest free block {self.largest_free()})") from None
                    order -= 1
            self._mark_allocated(block)
            allocated.append(block)
            pages -= 1 << order
            if not pages:
                break
        if original != size:  # drm_buddy_block_trim of the (last) block
            last = allocated.pop()
            keep = last.size - (size - original)
            allocated.extend(self._trim(last, keep))
        return allocated

    def _trim(self, block: Block, new_size: int) -> list[Block]:
        """drm_buddy_block_trim: give back the tail of an allocated block beyond new_size."""
        if block.state != ALLOCATED or new_size > block.size or new_size % self.chunk_size or not new_size:
            raise InputError(f"cannot trim a {block.size}-byte {block.state} block to {new_size}")
        if new_size == block.size:
            return [block]
        block.state = FREE
        insort(self.free_lists[block.order], block, key=lambda x: x.offset)
        self.avail += block.size
        parent, block.parent = block.parent, None  # do not merge past this block meanwhile
        out = self._alloc_range([block], block.offset, new_size)
        block.parent = parent
        return out

    def _alloc_range(self, dfs: list[Block], start: int, size: int) -> list[Block]:
        """__alloc_range: depth-first, allocate every free block inside [start, start+size)."""
        end = start + size - 1
        out: list[Block] = []
        total = 0
        while dfs:
            b = dfs.pop(0)
            b_end = b.end - 1
            if not (start <= b_end and end >= b.offset):
                continue
            if b.state == ALLOCATED:
                raise AssertionError("range allocation met an allocated block")
            if start <= b.offset and end >= b_end:
                self._mark_allocated(b)
                out.append(b)
                total += b.size
                continue
            if b.state != SPLIT:
                self._split(b)
            dfs[0:0] = [b.left, b.right]
        if total < size:
            raise AssertionError("range allocation came up short")
        return out

    # freeing --------------------------------------------------------------------------------
    def free_block(self, block: Block) -> None:
        """Free one allocated block and merge it with free buddies (drm_buddy_free_block)."""
        if not isinstance(block, Block):
            raise InputTypeError(f"expected a Block, got {type(block).__name__}")
        if block.state != ALLOCATED:
            raise InputError(f"block at {block.offset:#x} is {block.state}, not allocated (double free?)")
        self.avail += block.size
        while block.parent is not None:
            buddy = block.buddy()
            if buddy.state != FREE:
                break
            self._unlist(buddy)
            parent = block.parent
            parent.left = parent.right = None
            block.state = buddy.state = DEAD  # drm_block_free: these nodes no longer exist
            block = parent
        self._mark_free(block)

    def free(self, blocks: list[Block]) -> None:
        """Free a list of blocks (drm_buddy_free_list)."""
        for b in list(blocks):
            self.free_block(b)

    # inspection -----------------------------------------------------------------------------
    def leaves(self) -> list[Block]:
        """Every free or allocated block (the leaves of the tree), in address order."""
        out: list[Block] = []
        stack = list(reversed(self.roots))
        while stack:
            b = stack.pop()
            if b.state == SPLIT:
                stack.extend([b.right, b.left])
            else:
                out.append(b)
        return out

    def largest_free(self) -> int:
        """Size of the largest free block in bytes (0 when nothing is free)."""
        for o in range(self.max_order, -1, -1):
            if self.free_lists[o]:
                return self.chunk_size << o
        return 0

    def fragmentation(self) -> float:
        """External fragmentation, 1 - largest free block / free bytes (0 = one free block).

        0 means every free byte is in one block; near 1 means free memory exists only in
        small pieces, so a large *contiguous* request fails although enough bytes are free.
        """
        return 0.0 if self.avail == 0 else 1.0 - self.largest_free() / self.avail

    def free_by_order(self) -> dict[int, int]:
        """Number of free blocks of each order (what drm_buddy_print reports)."""
        return {o: len(lst) for o, lst in enumerate(self.free_lists) if lst}

    def check(self) -> None:
        """Verify every invariant; raises AssertionError naming the first broken one."""
        leaves = self.leaves()
        pos = 0
        for b in leaves:
            assert b.offset == pos, f"gap or overlap at {pos:#x} (next block at {b.offset:#x})"
            assert b.offset % b.size == 0, f"block at {b.offset:#x} not aligned to its size"
            pos = b.end
        assert pos == self.size, f"blocks cover {pos} of {self.size} bytes"
        free = [b for b in leaves if b.state == FREE]
        listed = [b for lst in self.free_lists for b in lst]
        assert len(listed) == len(free) and {id(b) for b in listed} == {id(b) for b in free}, \
            "free lists do not match the free blocks of the tree"
        for o, lst in enumerate(self.free_lists):
            assert all(b.order == o for b in lst), f"wrong order on free list {o}"
            assert [b.offset for b in lst] == sorted(b.offset for b in lst), f"free list {o} unsorted"
        assert self.avail == sum(b.size for b in free), "avail does not equal the free bytes"
        for b in free:  # merged as far as possible
            bud = b.buddy()
            assert bud is None or bud.state != FREE, f"free buddies at {b.offset:#x} were not merged"
