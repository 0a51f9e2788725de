"""The NVIDIA driver's mappings in a process: the /dev/nvidia* lines of /proc/PID/maps.

Every line of /proc/PID/maps is one virtual memory area: `start-end perms offset dev inode
path`. Lines whose path is a /dev/nvidia* node were created by mmap(2) on a file descriptor
of that node, and each node's mmap handler decides what the pages are. In NVIDIA's open
kernel modules (github.com/NVIDIA/open-gpu-kernel-modules; checked at tags 580.95.05 and
595.45.04):

- kernel-open/nvidia/nv.c: `nvidia_fops` routes mmap on /dev/nvidiactl and /dev/nvidiaN to
  `nvidia_mmap` (kernel-open/nvidia/nv-mmap.c), which calls `nvidia_mmap_helper`. There a
  comment states the split this module classifies by: the device node (nvidia#) maps the
  device's BAR memory, the control node (nvidiactl) maps system memory. A mapping must first
  be validated by the resource manager through an ioctl (NV_ESC_RM_MAP_MEMORY, in
  src/nvidia/arch/nvalloc/unix/include/nv_escape.h; `nv_add_mapping_context_to_file` in
  kernel-open/nvidia/nv-usermap.c records it), otherwise mmap is refused ("invalid mmap
  context"), and its page offset must be 0.
- For a device node, `nvidia_mmap_helper` maps register ranges (IS_REG_OFFSET) and the
  usermode region (IS_UD_OFFSET) uncached, and framebuffer (BAR1) ranges write-combined.
  The usermode region holds the doorbell: NVC361_NOTIFY_CHANNEL_PENDING at offset 0x90 of
  the 64 KiB (NVC361_NV_USERMODE__SIZE) VOLTA_USERMODE_A window
  (src/common/sdk/nvidia/inc/class/clc361.h; Hopper's HOPPER_USERMODE_A is constructed by
  `usrmodeConstruct_IMPL` in src/nvidia/src/kernel/gpu/fifo/usermode_api.c). Writing a
  channel's token there tells the GPU new work is queued — no system call involved.
- kernel-open/nvidia-uvm/uvm.c: `uvm_fops` routes mmap on /dev/nvidia-uvm to `uvm_mmap`
  (via `uvm_mmap_entry`), which requires offset == virtual address and backs managed
  (unified) memory ranges and semaphore pools (`uvm_vm_ops_semaphore_pool`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass

from helpers.core import validate
from helpers.core.errors import CourseError
from helpers.core.experiments import experiment

USERMODE_BYTES = 0x10000  # NVC361_NV_USERMODE__SIZE, src/common/sdk/nvidia/inc/class/clc361.h

_LINE = re.compile(r"^(?P<start>[0-9a-fA-F]+)-(?P<end>[0-9a-fA-F]+)\s+(?P<perms>[-r][-w][-x][ps])\s+"
                   r"(?P<offset>[0-9a-fA-F]+)\s+(?P<dev>[0-9a-fA-F]+:[0-9a-fA-F]+)\s+(?P<inode>\d+)"
                   r"(?:\s+(?P<path>.*?))?\s*$")

ROLES = {
    "control": ("control node /dev/nvidiactl",
                "system memory the driver allocated and shares with user space (command buffers, "
                "notifiers, semaphores): nvidia_mmap_helper's control-node branch"),
    "device": ("device node /dev/nvidiaN",
               "a window of the GPU's BARs: registers and the usermode doorbell (uncached) or "
               "device memory through BAR1 (write-combined): nvidia_mmap_helper's device-node branch"),
    "uvm": ("UVM /dev/nvidia-uvm",
            "unified (managed) memory ranges and semaphore pools, at offset == address: uvm_mmap"),
    "other": ("other NVIDIA node", "modeset, capabilities or tools nodes, not used for copies"),
}


class MapsFormatError(CourseError, ValueError):
    """A line is not in /proc/PID/maps format.

    Not an InputError: the lines come from the kernel (through the maps workload) or from a
    recording of it, never from a learner, so a malformed one is a data problem."""


@dataclass(frozen=True, kw_only=True)
class Mapping:
    """One line of /proc/PID/maps."""

    start: int
    end: int
    perms: str
    offset: int
    path: str

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def shared(self) -> bool:
        return self.perms.endswith("s")

    @property
    def node(self) -> str:
        return self.path.removesuffix(" (deleted)")

    @property
    def role(self) -> str:
        """'control', 'device', 'uvm', 'other' for /dev/nvidia* nodes, else ''."""
        return classify(self.node)

    @property
    def hint(self) -> str:
        """What the size and flags suggest (a hint from the source, not read from the driver)."""
        if self.role == "device" and self.size == USERMODE_BYTES and "x" not in self.perms:
            return "64 KiB: the size of the usermode region that holds the doorbell"
        if self.role == "uvm" and self.offset == self.start:
            return "offset == address, as uvm_mmap requires"
        if self.role in ("control", "device") and self.offset != 0:
            return "offset is not 0, which nvidia_mmap_helper would refuse: check the node"
        return ""


def classify(path: str) -> str:
    """Role of a /dev/nvidia* node from its name; '' for anything else."""
    path = path.removesuffix(" (deleted)")
    if path == "/dev/nvidiactl":
        return "control"
    if re.fullmatch(r"/dev/nvidia\d+", path):
        return "device"
    if path == "/dev/nvidia-uvm":
        return "uvm"
    if path.startswith("/dev/nvidia"):
        return "other"
    return ""


def parse_line(line: str) -> Mapping:
    """One maps line, or MapsFormatError saying what is wrong with it."""
    m = _LINE.match(line)
    if not m:
        raise MapsFormatError(f"not a /proc/PID/maps line: {line.strip()[:120]!r}")
    start, end = int(m["start"], 16), int(m["end"], 16)
    if end <= start:
        raise MapsFormatError(f"mapping ends before it starts: {line.strip()!r}")
    return Mapping(start=start, end=end, perms=m["perms"], offset=int(m["offset"], 16), path=m["path"] or "")


def parse(text: str) -> list[Mapping]:
    """Every mapping in maps text (blank lines ignored)."""
    return [parse_line(line) for line in text.splitlines() if line.strip()]


def nvidia_mappings(text_or_lines) -> list[Mapping]:
    """Only the mappings of /dev/nvidia* nodes."""
    text = text_or_lines if isinstance(text_or_lines, str) else "\n".join(text_or_lines)
    return [m for m in parse(text) if m.role]


def summary(maps: list[Mapping]) -> dict[str, dict]:
    """{role: {'count', 'bytes'}} for the roles present."""
    out: dict[str, dict] = {}
    for m in maps:
        s = out.setdefault(m.role, {"count": 0, "bytes": 0})
        s["count"] += 1
        s["bytes"] += m.size
    return out


def fmt_size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit == "B" else f"{n:.4g} {unit}"
        n /= 1024
    return f"{n} B"


def stage_rows(stages: list[dict]) -> list[tuple]:
    """Rows: stage, role, count, total size — how each step adds mappings."""
    rows = []
    for st in stages:
        s = summary(nvidia_mappings(st["lines"]))
        if not s:
            rows.append((st["stage"], "(none)", 0, "0 B"))
        for role in ("control", "device", "uvm", "other"):
            if role in s:
                rows.append((st["stage"], ROLES[role][0], s[role]["count"], fmt_size(s[role]["bytes"])))
    return rows


def mapping_rows(lines: list[str]) -> list[tuple]:
    """Rows per mapping: node, role, size, perms, offset, hint."""
    return [(m.node, ROLES[m.role][0].split(" /")[0], fmt_size(m.size), m.perms, f"{m.offset:#x}", m.hint)
            for m in nvidia_mappings(lines)]


def new_mappings(before: list[str], after: list[str]) -> list[Mapping]:
    """Mappings in `after` whose (start, end, path) were not in `before`."""
    old = {(m.start, m.end, m.node) for m in nvidia_mappings(before)}
    return [m for m in nvidia_mappings(after) if (m.start, m.end, m.node) not in old]


MAPS_BYTES = 64 << 20  # the pinned and managed allocations the workload makes (smoke test: 16 MiB)
MAPS_SIZE = validate.size(4096, 1 << 30)  # the sizes the workload accepts: 4 KiB to 1 GiB


def record(nbytes: int = MAPS_BYTES, timeout_s: float = 120.0) -> dict:
    """Run the maps workload in a fresh child (so 'before CUDA' really is before) and return it."""
    from helpers.ch01_path_of_a_copy.syscalls import WORKLOAD, run_child

    MAPS_SIZE(nbytes, "maps workload size")
    proc = run_child([sys.executable, str(WORKLOAD), "maps", str(nbytes)], timeout_s, "maps workload")
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or "").strip().splitlines()[-3:])
        raise CourseError(f"maps workload exited {proc.returncode}: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def as_dicts(maps: list[Mapping]) -> list[dict]:
    return [dict(asdict(m), size=m.size, role=m.role, hint=m.hint) for m in maps]


@experiment("path.driver_maps", chapter=1,
            title="/dev/nvidia* mappings in /proc/self/maps: before CUDA, after init, pinned, managed",
            params={"nbytes": MAPS_SIZE})
def record_driver_maps(quick: bool, nbytes: int = MAPS_BYTES) -> dict:
    """The workload's /dev/nvidia* mappings at each stage, with a per-role summary."""
    data = record(min(nbytes, 16 << 20) if quick else nbytes)
    for st in data["stages"]:
        st["summary"] = summary(nvidia_mappings(st["lines"]))
    return data


def stage_changes(stages: list[dict]) -> list[str]:
    """One sentence per step: new /dev/nvidia* mappings, and how the address space grew."""
    out = []
    for before, after in zip(stages, stages[1:], strict=False):
        new = new_mappings(before["lines"], after["lines"])
        grew = after["mapped_bytes"] - before["mapped_bytes"]
        noacc = after["reserved_noaccess_bytes"] - before["reserved_noaccess_bytes"]
        out.append(f"{after['stage']}:\n   {len(new)} new /dev/nvidia* mapping(s) "
                   f"({fmt_size(sum(m.size for m in new))}); address space grew by {fmt_size(grew)}, "
                   f"of which {fmt_size(noacc)} reserved with no access")
    return out
