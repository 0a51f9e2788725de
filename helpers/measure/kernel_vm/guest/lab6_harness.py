"""Lab 6's checks inside the VM: run a learner's VFIO driver for edu and observe the device.

Runs INSIDE the kernel lab's VM as root (/work/main.py imports it). Reads /work/plan.json:

    {"parts": [{"part": "factorial", "inputs": {...}}, ...],
     "learner": {name: {"source": text} | {"marshal": base64}},   # the learner's functions
     "reference": {name: {"source": text}},                        # graded: the other parts' answers
     "stand_ins": true}                                            # the notebook's checks (no reference)

and prints one JSON line per part, as soon as it is judged: {"part", "ok", "feedback", ...}.

Each part runs the driver in a fresh child process as uid 1000 (no root: it cannot touch the
result port, the other parts or this process), exec'd anew so that nothing of this process's
memory (the plan: every part's inputs and the reference) comes with it; it is sent only that
part's functions from the learner and the reference of every OTHER part (`child_functions`:
one bug costs one part; a function the learner did not write is "not defined", never the
reference), and each call's arguments. The plan file is deleted once read. In the notebook's
checks (no reference: "stand_ins") the other parts are the course's stand-ins instead
(lab6_standins.py), which work only with what this process opens for them as root and lends the
child as file descriptors (`Lent`); a graded child is lent nothing. The
child owns the device through VFIO; this process judges from outside what the device and
the kernel did, never from what the learner's functions claim alone: the registers read
through sysfs ``resource0``, the child's memory through /proc/<pid>/mem, its locked memory
(VmLck), the kernel log. Every call has a deadline; a child that overruns it is killed.
"""

from __future__ import annotations

import base64
import builtins
import ctypes
import fcntl
import json
import marshal
import math
import mmap
import os
import random
import re
import resource
import select
import signal
import struct
import sys
import time
import traceback
import types

import edu
import edu_probe

UID = 1000
PLAN = "/work/plan.json"
CALL_S = 20.0
MEMLOCK = 4 << 20
PART_FUNCTIONS = {
    "open": ("open_device",), "identify": ("identify", "check_alive"), "factorial": ("factorial",),
    "map": ("map_buffer",), "dma": ("dma_to_device", "dma_from_device"), "refuse": ("safe_dma",),
    "faults": ("fault_addresses",),
}
MODULES = {"edu": edu, "os": os, "mmap": mmap, "time": time, "struct": struct, "fcntl": fcntl, "ctypes": ctypes,
           "re": re, "math": math, "errno": __import__("errno")}


OBSERVER_MAPS: list = []  # the observer's mappings of BAR0, which a child unmaps before the learner's code runs


class Fail(Exception):
    """The part failed; the message is the learner's feedback."""


# ------------------------------------------------------------------------ the child (uid 1000)
def load_functions(entries: dict, ns: dict) -> None:
    for name, e in entries.items():
        if "source" in e:
            exec(compile(e["source"], f"<{name}>", "exec"), ns)  # noqa: S102 - runs as uid 1000 in the VM
        else:
            code = marshal.loads(base64.b64decode(e["marshal"]))
            ns[name] = types.FunctionType(code, ns, name, tuple(e.get("defaults") or ()) or None)


def child_functions(plan: dict, part: str) -> dict:
    """The functions the child of `part` gets, and nothing else of the plan: graded (a reference
    given), the learner's functions of this part and their own helpers, and the reference of the
    OTHER parts only (never this part's: a function the learner did not write is "not defined");
    the learner's own try (no reference), every function of theirs. No inputs, no expected value."""
    if not plan["reference"]:
        return dict(plan["learner"])
    driver = set().union(*PART_FUNCTIONS.values())
    mine = set(PART_FUNCTIONS[part])
    out = {n: e for n, e in plan["reference"].items() if n not in mine}
    out.update({n: e for n, e in plan["learner"].items() if n in mine or n not in driver})
    return out


def look_through_bar(dev, value: int) -> list[int]:
    """The check's own look through the BAR0 mapping open_device made (the harness's code in the
    child, not a learner function): edu's registers 0x00 and 0x04 as read there, then `value`
    written to 0x04 there. The observer judges both against what it sees through resource0."""
    m = getattr(getattr(dev, "bar", None), "map", None)
    if not isinstance(m, mmap.mmap) or len(m) < 8:
        raise TypeError("dev.bar is not an edu.Bar over a mapping of BAR0 (edu.Bar(mmap.mmap(...)))")
    seen = [ctypes.c_uint32.from_buffer(m, off).value for off in (edu.REG_ID, edu.REG_LIVENESS)]
    ctypes.c_uint32.from_buffer(m, edu.REG_LIVENESS).value = value & 0xFFFFFFFF
    return seen


def child_main(rfd: int, wfd: int, lent: str = "") -> None:
    """The child after exec (a fresh interpreter: nothing of the observer's memory, plan or inputs):
    read the functions it may hold from the first line (and, in the notebook's checks, put the
    stand-ins of the other parts over them with what `lent` names), then answer calls until the
    pipe closes."""
    inp, out = os.fdopen(rfd, "r"), os.fdopen(wfd, "w")
    ns: dict = {"__builtins__": builtins, "__name__": "driver", **MODULES}
    load_functions(json.loads(inp.readline()), ns)
    if lent:
        import lab6_standins

        given = json.loads(lent)
        lab6_standins.lend(given["handles"])
        ns.update(lab6_standins.for_part(given["part"]))
    held: dict = {}
    for line in inp:
        req = json.loads(line)
        args = [held.get("dev") if a == {"$dev": True} else a for a in req["args"]]
        value = None
        try:
            if req["fn"] == "$bar":
                value = look_through_bar(*args)
            elif req["fn"] not in ns:
                raise NameError(f"name {req['fn']!r} is not defined: your notebook does not define it")
            else:
                value = ns[req["fn"]](*args)
            if isinstance(value, edu.VfioDevice):
                held["dev"] = value
                value = {"$dev": True}
            json.dumps(value)
            reply = {"ok": value}
        except BaseException as exc:  # noqa: BLE001 - everything the learner raised goes back as data
            if isinstance(exc, (TypeError, ValueError)) and "JSON" in str(exc):
                reply = {"raised": "TypeError", "types": ["TypeError"], "message": f"returned a {type(value).__name__}, "
                         "not plain data (a number, a string, a list, None)"}
            else:
                reply = {"raised": type(exc).__name__, "types": [c.__name__ for c in type(exc).__mro__],
                         "message": str(exc)[:300], "where": traceback.format_exc(limit=-1)[-300:]}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    os._exit(0)


def exec_child(rfd: int, wfd: int, lent: Lent | None = None) -> None:
    """In the forked child, before any learner code: let go of everything inherited (the result
    port, the kernel log, the observer's view of BAR0, every other descriptor but the pipes and,
    in the notebook's checks, what `lent` lends the stand-ins), drop to uid 1000, and exec a
    fresh interpreter (the fork's copy of this process's memory, where the plan with every
    part's reference and hidden inputs lives, is gone with the exec)."""
    console = os.open("/dev/console", os.O_WRONLY)
    for fd in (0, 1, 2):
        os.dup2(console, fd)
    for m in OBSERVER_MAPS:
        m.close()
    keep = sorted({rfd, wfd, *(lent.fds if lent else ())})
    for lo, hi in zip([2, *keep], [*keep, 4096], strict=True):
        os.closerange(lo + 1, hi)
    for fd in keep:
        os.set_inheritable(fd, True)
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (MEMLOCK, MEMLOCK))
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
    os.setgroups([])
    os.setgid(UID)
    os.setuid(UID)
    os.execv(sys.executable, [sys.executable, "-S", "-u", os.path.abspath(__file__), "--child", str(rfd), str(wfd),
                              *([lent.argument()] if lent else [])])


class Lent:
    """What this process (root) opens for one part's stand-ins in the notebook's checks, and lends
    the child as file descriptors: for a part that builds on Part 1, the VFIO triple opened with
    the chapters' probe (edu_probe.Vfio), bus mastering on, and sysfs resource0 (root only); on
    Part 4, a memfd mapped for the device at the check's IOVA from this process (MAP_DMA, the
    same probe). Never made for a graded part. This process lets go of its copies once the
    child holds them (`release`), so the child's exit frees the group for the next part."""

    def __init__(self, part: str, inp: dict, bdf: str):
        import lab6_standins

        self.part, self.fds, self.handles, self._held = part, [], {}, []
        needs = lab6_standins.BUILDS_ON[part]
        if "open" in needs:
            self.handles["resource0"] = self._fd(os.open(f"/sys/bus/pci/devices/{bdf}/resource0", os.O_RDWR | os.O_SYNC))
            v = edu_probe.Vfio(bdf)
            self._held.append(v)
            v.bus_master()
            self.handles.update(container=v.container, group=v.group, device=v.device,
                                config_offset=v.cfg_info["offset"])
            self.fds += [v.container, v.group, v.device]
        if "map" in needs:
            iova, size = inp["iova"], inp["size"]
            memfd = self._fd(os.memfd_create("lab6-stand-in", 0))
            os.ftruncate(memfd, size)
            buf = mmap.mmap(memfd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self._held.append(buf)
            v.map_dma(ctypes.addressof(ctypes.c_char.from_buffer(buf)), iova, size)
            self.handles["buffers"] = [[iova, size, memfd]]

    def _fd(self, fd: int) -> int:
        self.fds.append(fd)
        return fd

    def argument(self) -> str:
        return json.dumps({"part": self.part, "handles": self.handles})

    def release(self) -> None:
        """This process's copies go (the BAR mapping, the buffer's view, every descriptor)."""
        for h in self._held:
            if isinstance(h, edu_probe.Vfio):
                h.bar.close()
            else:
                h.close()
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._held, self.fds = [], []


# ------------------------------------------------------------------------ this process (root)
class Child:
    """The learner's driver in its child process, called by name with a deadline per call."""

    def __init__(self, functions: dict, lent: Lent | None = None):
        a_r, a_w = os.pipe()
        b_r, b_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(a_w)
            os.close(b_r)
            try:
                exec_child(a_r, b_w, lent)
            finally:
                os._exit(1)
        os.close(a_r)
        os.close(b_w)
        if lent is not None:
            lent.release()
        self.to, self.frm = os.fdopen(a_w, "w"), b_r
        self.buf = b""
        self.to.write(json.dumps(functions) + "\n")  # the only thing of the plan the child gets
        self.to.flush()

    def call(self, fn: str, *args, timeout: float = CALL_S):
        self.to.write(json.dumps({"fn": fn, "args": list(args)}) + "\n")
        self.to.flush()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.frm], [], [], left)[0]:
                self.kill()
                raise Fail(f"{fn} did not return within {timeout:.0f} s (a wait without a timeout?)")
            chunk = os.read(self.frm, 65536)
            if not chunk:
                self.kill()
                raise Fail(f"your driver's process ended during {fn} (it crashed or exited)")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        reply = json.loads(line)
        if "raised" in reply:
            raise Raised(fn, reply)
        return reply["ok"]

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        try:
            self.to.close()
        except OSError:
            pass
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.05)
        else:
            self.kill()
            os.waitpid(self.pid, 0)
        os.close(self.frm)


class Raised(Exception):  # noqa: N818 - the learner's function raised
    def __init__(self, fn: str, reply: dict):
        self.fn, self.types, self.name, self.message = fn, reply["types"], reply["raised"], reply["message"]
        super().__init__(f"{fn} raised {self.name}: {self.message}")


class Observer:
    """What this process sees for itself: edu's registers (sysfs resource0), a child's memory, the log."""

    def __init__(self, bdf: str):
        fd = os.open(f"/sys/bus/pci/devices/{bdf}/resource0", os.O_RDWR | os.O_SYNC)
        mapping = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        OBSERVER_MAPS.append(mapping)
        self.bar = edu.Bar(mapping)
        self.log = edu.Kmsg()

    def peek(self, pid: int, addr: int, n: int) -> bytes:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as f:
            f.seek(addr)
            return f.read(n)

    def poke(self, pid: int, addr: int, data: bytes) -> None:
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as f:
            f.seek(addr)
            f.write(data)

    def vmlck_kib(self, pid: int) -> int:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmLck:"):
                    return int(line.split()[1])
        return -1

    def bus_master(self, bdf: str) -> None:
        """Turn edu's bus mastering on through sysfs (vfio-pci turns it off when a driver lets go)."""
        fd = os.open(f"/sys/bus/pci/devices/{bdf}/config", os.O_RDWR)
        try:
            cmd = int.from_bytes(os.pread(fd, 2, edu.PCI_COMMAND), "little")
            os.pwrite(fd, (cmd | edu.PCI_COMMAND_MASTER | edu.PCI_COMMAND_MEMORY).to_bytes(2, "little"), edu.PCI_COMMAND)
        finally:
            os.close(fd)

    def dma(self, src: int, dst: int, count: int, to_ram: bool) -> None:
        """A DMA this process starts itself, through its own view of BAR0."""
        edu.start_dma(self.bar, src, dst, count, to_ram)
        edu.wait_dma_done(self.bar)

    def fd_targets(self, pid: int) -> list[str]:
        out = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
        return out


def need(ok: bool, feedback: str) -> None:
    if not ok:
        raise Fail(feedback)


def expect_value_error(call, what: str, obs: Observer) -> None:
    before = [obs.bar.read64(r) for r in (edu.REG_DMA_SRC, edu.REG_DMA_DST, edu.REG_DMA_CNT)]
    try:
        call()
    except Raised as exc:
        if "NotImplementedError" in exc.types:
            raise
        need("ValueError" in exc.types, f"{what}: expected ValueError, your safe_dma raised {exc.name}: {exc.message}")
    else:
        raise Fail(f"{what}: your safe_dma returned instead of raising ValueError")
    after = [obs.bar.read64(r) for r in (edu.REG_DMA_SRC, edu.REG_DMA_DST, edu.REG_DMA_CNT)]
    need(before == after, f"{what}: ValueError came, but only after edu's DMA registers were written "
                          f"(refuse before touching the device)")


# ------------------------------------------------------------------------ the parts
def part_open(ch: Child, obs: Observer, inp: dict, env: dict) -> dict:
    got = ch.call("open_device", env["bdf"])
    need(got == {"$dev": True}, f"open_device returned {got!r}, not an edu.VfioDevice")
    fds = obs.fd_targets(ch.pid)
    need("/dev/vfio/vfio" in fds, "your process holds no open /dev/vfio/vfio (the container)")
    need(env["group_dev"] in fds, f"your process holds no open {env['group_dev']} (edu's IOMMU group)")
    need(any("vfio-device" in t for t in fds), "your process holds no VFIO device fd (GROUP_GET_DEVICE_FD)")
    v, s = inp["alive"], inp["sentinel"]
    obs.bar.write32(edu.REG_LIVENESS, s)  # edu now holds ~s, which only a mapping of BAR0 can read
    try:
        ident, live = ch.call("$bar", {"$dev": True}, v)
    except Raised as exc:
        raise Fail(f"the check could not read through your dev.bar: {exc.message}") from None
    need(ident == 0x010000ED, f"register 0x00 read through your dev.bar gave {ident:#x}, not edu's identification: "
                              "is BAR0 mapped through the device fd, at BAR0's region offset?")
    need(live == (~s & 0xFFFFFFFF) and obs.bar.read32(edu.REG_LIVENESS) == (~v & 0xFFFFFFFF),
         "a value written to register 0x04 through your dev.bar did not reach edu (or the device's answer did not "
         "come back through it)")
    return {"fds": sorted(set(fds))[:8]}


def part_identify(ch: Child, obs: Observer, inp: dict, env: dict) -> dict:
    ch.call("open_device", env["bdf"])
    ident = ch.call("identify", {"$dev": True})
    need(ident == 0x010000ED, f"identify returned {ident!r}; edu's register 0x00 holds something else")
    for v, sentinel in zip(inp["values"], inp["sentinels"], strict=True):
        obs.bar.write32(edu.REG_LIVENESS, sentinel)
        got = ch.call("check_alive", {"$dev": True}, v)
        need(got == (~v & 0xFFFFFFFF), f"check_alive(dev, {v:#010x}) returned {got!r}; the device answers with "
                                       "the bitwise inverse of what was written, as a 32-bit value")
        need(obs.bar.read32(edu.REG_LIVENESS) == (~v & 0xFFFFFFFF), f"after check_alive(dev, {v:#010x}) the device's "
             "register 0x04 does not hold its inverse: the value never reached the device")
    return {}


def part_factorial(ch: Child, obs: Observer, inp: dict, env: dict) -> dict:
    ch.call("open_device", env["bdf"])
    for n, k in zip(inp["n"], inp["sentinels"], strict=True):
        obs.bar.write32(edu.REG_FACTORIAL, k)
        while obs.bar.read32(edu.REG_STATUS) & edu.STATUS_COMPUTING:
            time.sleep(0.001)
        got = ch.call("factorial", {"$dev": True}, n)
        need(got == math.factorial(n), f"factorial(dev, {n}) returned {got!r}")
        need(obs.bar.read32(edu.REG_FACTORIAL) == math.factorial(n), f"after factorial(dev, {n}) the device's register "
             "0x08 does not hold the result: the device did not compute it")
    return {}


def verify_mapping(ch: Child, obs: Observer, vaddr: int, iova: int, size: int, rng: random.Random) -> None:
    """Bytes placed at vaddr travel through the device at `iova` and land at vaddr + half."""
    n = min(512, size // 2)
    p = rng.randbytes(n)
    half = size // 2
    obs.poke(ch.pid, vaddr, p)
    obs.poke(ch.pid, vaddr + half, bytes(n))
    obs.dma(iova, edu.DMA_BUFFER, n, to_ram=False)
    obs.dma(edu.DMA_BUFFER, iova + half, n, to_ram=True)
    need(obs.peek(ch.pid, vaddr + half, n) == p, f"a DMA through IOVA {iova:#x} did not reach the memory at the "
                                                 "address map_buffer returned: is that buffer what you mapped?")


def part_map(ch: Child, obs: Observer, inp: dict, env: dict) -> dict:
    ch.call("open_device", env["bdf"])
    before = obs.vmlck_kib(ch.pid)
    vaddr = ch.call("map_buffer", {"$dev": True}, inp["iova"], inp["size"])
    need(isinstance(vaddr, int) and vaddr > 0, f"map_buffer returned {vaddr!r}, not the buffer's address")
    after = obs.vmlck_kib(ch.pid)
    need(after - before >= inp["size"] // 1024, f"your process's locked memory grew by {after - before} KiB, not "
         f"{inp['size'] // 1024}: VFIO_IOMMU_MAP_DMA did not pin {inp['size']} bytes")
    verify_mapping(ch, obs, vaddr, inp["iova"], inp["size"], random.Random(inp["seed"]))
    return {"vmlck_kib": [before, after]}


def part_dma(ch: Child, obs: Observer, inp: dict, env: dict) -> dict:
    ch.call("open_device", env["bdf"])
    iova, size, n = inp["iova"], inp["size"], inp["count"]
    vaddr = ch.call("map_buffer", {"$dev": True}, iova, size)
    rng = random.Random(inp["seed"])
    p, q = rng.randbytes(n), rng.randbytes(n)
    o1, o2, o3, o4 = inp["offsets"]
    obs.poke(ch.pid, vaddr + o1, p)
    ch.call("dma_to_device", {"$dev": True}, iova + o1, n)
    need(not obs.bar.read64(edu.REG_DMA_CMD) & edu.DMA_RUN, "dma_to_device returned while the DMA was still running "
                                                            "(wait for the run bit of 0x98 to clear)")
    obs.poke(ch.pid, vaddr + o1, bytes(n))
    obs.poke(ch.pid, vaddr + o2, bytes(n))
    obs.dma(edu.DMA_BUFFER, iova + o2, n, to_ram=True)
    need(obs.peek(ch.pid, vaddr + o2, n) == p, f"after dma_to_device(dev, {iova + o1:#x}, {n}) edu's buffer does not "
                                               "hold those bytes")
    obs.poke(ch.pid, vaddr + o3, q)
    obs.dma(iova + o3, edu.DMA_BUFFER, n, to_ram=False)
    obs.poke(ch.pid, vaddr + o3, bytes(n))
    obs.poke(ch.pid, vaddr + o4, bytes(n))
    ch.call("dma_from_device", {"$dev": True}, iova + o4, n)
    need(not obs.bar.read64(edu.REG_DMA_CMD) & edu.DMA_RUN, "dma_from_device returned while the DMA was still running")
    need(obs.peek(ch.pid, vaddr + o4, n) == q, f"after dma_from_device(dev, {iova + o4:#x}, {n}) the buffer does not "
                                               "hold what edu's buffer held")
    return {}


def part_refuse(ch: Child, obs: Observer, inp: dict, env: dict) -> dict:
    ch.call("open_device", env["bdf"])
    iova, size = inp["iova"], inp["size"]
    ch.call("map_buffer", {"$dev": True}, iova, size)
    obs.log.new_lines()
    for what, args in (("an IOVA nobody mapped", (inp["unmapped"], 64, False)),
                       ("a range running past the end of the mapping", (iova + size - 16, 64, True)),
                       (f"{edu.DMA_BUFFER_SIZE} bytes (more than QEMU 7.2's edu copies safely)",
                        (iova, edu.DMA_BUFFER_SIZE, True)),
                       ("0 bytes", (iova, 0, True))):
        expect_value_error(lambda a=args: ch.call("safe_dma", {"$dev": True}, *a), f"safe_dma for {what}", obs)
    n, off = inp["count"], inp["offset"]
    ch.call("safe_dma", {"$dev": True}, iova + off, n, True)
    need(not obs.bar.read64(edu.REG_DMA_CMD) & edu.DMA_RUN, "safe_dma returned while the DMA was still running")
    need((obs.bar.read64(edu.REG_DMA_DST), obs.bar.read64(edu.REG_DMA_CNT)) == (iova + off, n),
         f"safe_dma(dev, {iova + off:#x}, {n}, to_ram=True) inside the mapping did not run that DMA")
    faults = [x for x in obs.log.new_lines(wait_s=0.5, want="DMAR") if "fault addr" in x]
    need(not faults, f"the IOMMU reported a fault while your safe_dma ran: {faults[:1]}")
    return {}


def part_faults(ch: Child, obs: Observer, inp: dict, env: dict) -> dict:
    obs.bus_master(env["bdf"])
    obs.log.new_lines()
    for iova in inp["iovas"]:
        obs.dma(edu.DMA_BUFFER, iova, 16, to_ram=True)
    lines = obs.log.new_lines(wait_s=3.0, want=f"{inp['iovas'][-1]:x} ")
    lines = inp["noise"][:1] + lines + inp["noise"][1:]
    got = ch.call("fault_addresses", lines)
    need(isinstance(got, list) and all(isinstance(x, int) for x in got),
         f"fault_addresses returned {got!r}"[:200] + ", not a list of numbers")
    need(got == inp["iovas"], f"fault_addresses gave {[hex(x) for x in got]} for these kernel lines: "
                              + " | ".join(x for x in lines if "DMAR" in x)[:500])
    return {"lines": len(lines)}


PARTS = {"open": part_open, "identify": part_identify, "factorial": part_factorial, "map": part_map,
         "dma": part_dma, "refuse": part_refuse, "faults": part_faults}


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    with open(PLAN) as f:
        plan = json.load(f)
    os.unlink(PLAN)  # every part's inputs and the reference: not for the learner's processes to read
    bdf = edu.find_edu()
    edu.bind_vfio(bdf)
    group_dev = f"/dev/vfio/{edu.iommu_group(bdf)}"
    os.chown(group_dev, UID, UID)
    with open("/proc/sys/kernel/dmesg_restrict", "w") as f:
        f.write("0")
    obs = Observer(bdf)
    env = {"bdf": bdf, "group_dev": group_dev}
    stand_ins = bool(plan.get("stand_ins")) and not plan["reference"]  # never beside a reference (graded)
    emit({"start": True, "parts": [p["part"] for p in plan["parts"]]})
    for p in plan["parts"]:
        t0 = time.monotonic()
        ch = lent = None
        try:
            lent = Lent(p["part"], p["inputs"], bdf) if stand_ins else None
            ch = Child(child_functions(plan, p["part"]), lent)
            details = PARTS[p["part"]](ch, obs, p["inputs"], env)
            res = {"part": p["part"], "ok": True, "feedback": "", **details}
        except Fail as exc:
            res = {"part": p["part"], "ok": False, "feedback": str(exc)}
        except Raised as exc:
            stub = "NotImplementedError" in exc.types
            res = {"part": p["part"], "ok": False, "feedback": (f"not written yet: {exc.fn} raises NotImplementedError (write the # YOUR CODE HERE part)"
                                                                 if stub else str(exc))}
        except Exception as exc:  # a failure of the checks themselves: the part cannot be graded
            res = {"part": p["part"], "ok": False, "error": True,
                   "feedback": f"the check failed ({type(exc).__name__}: {exc})"[:400]}
        finally:
            if lent is not None:
                lent.release()  # already let go when the child started; here if it never did
            if ch is not None:
                ch.close()
        res["seconds"] = round(time.monotonic() - t0, 3)
        emit(res)
    emit({"done": True})
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child_main(int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5])
    sys.exit(main())
