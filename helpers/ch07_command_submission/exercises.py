"""Chapter 7's exercises. Expected values are computed here from the chapter's Evidence (the
recordings or a live run), never on the page; each check explains its answer."""

from __future__ import annotations

from helpers.ch07_command_submission import launch
from helpers.core import gpu
from helpers.core.evidence import Evidence
from helpers.learning import checks
from helpers.learning.checks import factor_hint
from helpers.measure.transfers import wait_event

GAIN_OPTIONS = {
    "a": "the doorbell: one doorbell write for the whole chain instead of one per kernel",
    "b": "the CPU's per-launch driver work (checking arguments, writing methods and a GPFIFO entry) done once at "
         "capture, and lighter per-kernel work in the GPU's front end",
    "c": "system calls: each ordinary launch enters the kernel, a graph launch does not",
    "d": "the kernels themselves run faster on the SMs inside a graph",
}
GAIN_WHY = {
    "a": "No: one doorbell store costs tens of nanoseconds (about 0.06 µs in the toy's model), while the graph saves "
         "about 5 µs per kernel in the recording. Even a doorbell per kernel would be around 1% of the difference.",
    "b": "Right. One by one, each launch costs ~5–6 µs of CPU time in the driver, more than the ~2 µs the GPU needs "
         "per kernel, so the chain runs at the CPU's pace. A graph is checked and encoded once; launching it is one "
         "call, and the GPU runs its kernels at ~1.1 µs each instead of ~2.",
    "c": "No: ordinary launches make no system call either — the CPU-time split in section 4 shows almost no system "
         "time; the doorbell is a store to a mapped page.",
    "d": "No: the kernels do the same work (add 1 to an integer); what shrinks is the cost around each kernel, "
         "on the CPU and in the GPU's front end.",
}


def ex71_graph_gain(answer) -> bool | None:
    """7.1: where does a CUDA Graph's gain come from?"""
    return checks.choice("7.1 the graph's gain", answer, GAIN_OPTIONS, "b", GAIN_WHY)


def loop_bound_us(lo: Evidence, kernels: int = 200) -> float:
    """µs per step for `kernels` separately launched 1-thread kernels: the slower of the CPU's
    enqueue rate and the GPU's back-to-back rate, from the 'tiny' row of the launch recording."""
    s = launch.launch_summary(lo.require())["tiny"]
    return kernels * max(s["host_us"], s["device_us"])


def ex72_loop_time(answer, lo: Evidence) -> bool | None:
    """7.2: a step of 200 tiny kernels launched one by one, nothing else: µs per step?"""
    if not lo.ok:
        print(f"… 7.2 needs the launch recording: {lo.missing}")
        return None
    expected = loop_bound_us(lo)
    s = launch.launch_summary(lo.data)["tiny"]
    hints = [factor_hint(s["device_us"] / s["host_us"], "that is the GPU's pace; can the GPU run a kernel that "
                                                        "the CPU has not enqueued yet?"),
             factor_hint(s["round_trip_us"] / s["host_us"], "that is launch-and-wait per kernel; nothing here waits "
                                                            "between kernels, so launches overlap with execution."),
             factor_hint(1e-3, "µs, not ms."),
             factor_hint((s["host_us"] + s["device_us"]) / s["host_us"], "the CPU and the GPU work at the same time "
                                                                         "(a queue sits between them): take the "
                                                                         "slower, not the sum.")]
    return checks.close("7.2 one step", answer, expected, rel_tol=0.05, hints=hints,
                        why="a producer (the CPU, ~host µs per launch) feeds a consumer (the GPU, ~device µs per "
                            "kernel) through a queue; the pipeline runs at the slower one's rate — here the CPU's.")


RPTR_OPTIONS = {
    "a": "a register read is a non-posted round trip over PCIe (around a microsecond) that stalls the CPU; a copy "
         "the GPU writes to host memory is read with an ordinary cached load",
    "b": "the read-pointer register does not exist on real GPUs",
    "c": "reading the register would stop the GPU while it answers",
    "d": "the memory copy is always more up to date than the register",
}
RPTR_WHY = {
    "a": "Right. In the toy's batching table, wherever its driver reads RING_HEAD, those round trips are most of the "
         "bus cost left once doorbells are amortised. amdgpu reads ring->rptr_cpu_addr; NVIDIA's own code reads a "
         "semaphore the GPU releases into memory as it consumes the ring (nvidia-push's GpFifoReadGpGet), not "
         "USERD's GPGet.",
    "b": "No: engines do have read-pointer registers (amdgpu reads some for debugging and hang detection); they are "
         "just expensive to read from the CPU.",
    "c": "No: the GPU keeps running; it is the CPU that waits for the read's completion to come back.",
    "d": "No: the copy can lag the register slightly; that is safe, because a stale read pointer only "
         "under-estimates the free space.",
}


def ex73_rptr_writeback(answer) -> bool | None:
    """7.3: why do real drivers read a read pointer the GPU writes back to memory?"""
    return checks.choice("7.3 read-pointer writeback", answer, RPTR_OPTIONS, "a", RPTR_WHY)


IOCTL_OPTIONS = {
    "a": "ring the doorbell: on AMD GPUs only the kernel may write a doorbell",
    "b": "make every buffer the job uses resident and mapped (TTM validation), order the job after the fences "
         "already on those buffers and on its syncobjs, and hand it to drm_sched, whose finished fence it then puts "
         "back on every buffer",
    "c": "copy the job's commands into kernel memory, because the GPU cannot read a ring in user memory",
    "d": "nothing essential: a system call is simply faster than a store to a mapped page",
}
IOCTL_WHY = {
    "a": "No: ROCm's queues, on the same GPUs and the same amdgpu driver, get their doorbell page mapped into the "
         "process (AMDKFD_IOC_CREATE_QUEUE returns its offset). The DRM path's doorbell is rung by the kernel "
         "because the kernel runs the job, in amdgpu_job_run, not because it must.",
    "b": "Right. Those steps need the kernel to see each job: residency under memory pressure (TTM may have evicted "
         "the buffer since the last job), implicit sync through reservation objects shared with other processes "
         "and drivers, explicit dependencies, and a fence that is guaranteed to signal.",
    "c": "No: the indirect buffers stay where user space wrote them (in GPU-visible buffer objects); KFD's user "
         "queues even keep the ring itself in the process's memory.",
    "d": "No: Chapter 7's measurements show the opposite — a store to a mapped doorbell costs tens of nanoseconds, "
         "a system call with validation costs microseconds.",
}


def ex75_ioctl_per_job(answer) -> bool | None:
    """7.5: what does amdgpu's CS ioctl do that a user-mode queue cannot?"""
    return checks.choice("7.5 an ioctl per job", answer, IOCTL_OPTIONS, "b", IOCTL_WHY)


# -- 7.4: capture a chain as a CUDA Graph (coding) ------------------------------------------------
class _Recorder:
    """A stand-in stream and kernel that record what the learner's function does with them."""

    def __init__(self):
        self.log: list[str] = []
        self.capturing = False
        self.graph = object()

    def begin_capture(self, *a, **k):
        self.log.append("begin")
        self.capturing = True

    def end_capture(self):
        self.log.append("end")
        self.capturing = False
        return self.graph

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def kernel(self, grid, block, args):
        self.log.append("launch (captured)" if self.capturing else "launch (ran now)")


def _stand_in_trial(fn, n: int) -> list[str]:
    r = _Recorder()
    got = fn(r, r.kernel, "x", n)
    launches = [e for e in r.log if e.startswith("launch")]
    problems = []
    if r.log.count("begin") != 1 or r.log.count("end") != 1:
        problems.append(f"call stream.begin_capture() once and stream.end_capture() once (you called them "
                        f"{r.log.count('begin')} and {r.log.count('end')} times)")
    if len(launches) != n:
        problems.append(f"asked for a chain of {n} kernels, your function launched {len(launches)}")
    if any(e == "launch (ran now)" for e in launches):
        problems.append("some launches happened outside the capture: they ran at once instead of joining the graph")
    if got is not r.graph:
        problems.append("return the graph that stream.end_capture() gives")
    return problems


def _gpu_trial(fn, n: int) -> list[str]:
    cp = gpu.cupy()
    k = launch._kernel("add_one")
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.zeros(1, dtype=cp.int32)
    graph = fn(s, k, x, n)
    if x.get()[0] != 0:
        return ["x changed while capturing: the launches ran instead of being recorded"]
    for _ in range(2):
        graph.launch(s)
    done = cp.cuda.Event()
    done.record(s)
    wait_event(done, launch.TIMEOUT_S, "your graph")
    got = int(x.get()[0])
    return [] if got == 2 * n else [f"two launches of your {n}-kernel graph should add {2 * n} to x, got {got}"]


def capture_trial(fn) -> list[str]:
    """Check the learner's capture(stream, kernel, x, n): with stand-ins everywhere, and on a GPU
    also for real (the graph, launched twice, must add 2n to x)."""
    import random

    n = random.randrange(3, 40)
    problems = _stand_in_trial(fn, n)
    if problems:
        return problems
    if not gpu.probe().usable:
        print("  (no GPU here: checked with a stand-in stream that records your calls; "
              "the real graph launch runs on a GPU only)")
        return []
    return _gpu_trial(fn, n)


def ex74_capture(fn) -> bool | None:
    """7.4 (coding): capture(stream, kernel, x, n) -> a CUDA Graph of n launches of kernel(x)."""
    return checks.code("7.4 capture a chain", fn, capture_trial,
                       why="between begin_capture and end_capture, launches on the stream are recorded into a graph "
                           "instead of running; graph.launch(stream) then submits the whole chain with one call.")


# -- 7.6: one stream, several rings ---------------------------------------------------------------
ORDER_OPTIONS = {
    "a": "nothing: once the steps are on different channels they may run in any order",
    "b": "the CPU: CuPy waits for the kernel to finish before it rings the copy channel's doorbell",
    "c": "the GPU: the copy channel is told to wait for a value that the compute channel writes when the kernel "
         "is done (a semaphore acquire and release, methods every channel class has)",
    "d": "the copy engine watches the SMs and starts when they are idle",
}
ORDER_WHY = {
    "a": "No: stream order is CUDA's promise whatever runs the steps (on the lanes, each stream's copy back starts "
         "after its kernel ends); different rings only mean the order must be kept across them.",
    "b": "No: the code queues the copy, the kernel and the copy back with no wait between them (the only wait is "
         "after all of them, before the trace closes), so the CPU was not in the loop.",
    "c": "Right. The channel classes carry semaphore methods for this (Hopper's clc86f.h: NVC86F_SEM_EXECUTE with "
         "OPERATION_ACQUIRE or RELEASE): one channel waits in its own pushbuffer until a value in memory reaches "
         "what another channel releases. Which exact methods the closed CUDA driver emits is not public; that the "
         "wait happens on the GPU follows from the CPU never waiting between the steps.",
    "d": "No: the copy engine knows nothing of the SMs' work; other streams' kernels keep the SMs busy while this "
         "stream's copy runs, as the many-stream figure shows.",
}


def ex76_stream_order(answer) -> bool | None:
    """7.6: what keeps a stream's copy back behind its kernel when they run from different channels?"""
    return checks.choice("7.6 one stream, several rings", answer, ORDER_OPTIONS, "c", ORDER_WHY)
