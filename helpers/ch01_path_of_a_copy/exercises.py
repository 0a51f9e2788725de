"""Chapter 1's exercises: the expected values come from the chapter's Evidence here, never from
the page (helpers.learning.checks explains the kinds)."""

from __future__ import annotations

from helpers.ch01_path_of_a_copy import copy_standin, cpu_time, driver_maps, syscalls
from helpers.core import gpu
from helpers.learning import checks
from helpers.learning.checks import factor_hint


def extra_ioctls(answer, census_data: dict) -> bool | None:
    """1.1: how many more ioctl calls 1000 round trips make than none, by the fitted slope."""
    expected = round(syscalls.growth(census_data, "ioctl").per_round * 1000)
    given = answer
    if answer is not None:
        value, problem = checks.quantity(answer)
        if not problem:
            given = round(value)  # the fit's slope x 1000, to a count; a non-number goes on for equal's ✘
    return checks.equal("1.1 extra ioctls for 1000 round trips", given, expected,
                        hint="Take the fitted 'calls per round trip' of the ioctl row and multiply by 1000. If every "
                             "copy and launch entered the driver, it would be 3 per round trip: 3000.",
                        why="the driver is entered only at start-up; copies and launches after it reach the GPU "
                            "through shared memory and a doorbell store, with no system call.")


def doorbell_count(answer, maps_data: dict) -> bool | None:
    """1.2: the 64 KiB write-only /dev/nvidia0 windows (the usermode region) after start-up."""
    init = next(s for s in maps_data["stages"] if "initialisation" in s["stage"])
    truth = sum(1 for m in driver_maps.nvidia_mappings(init["lines"])
                if m.role == "device" and m.size == driver_maps.USERMODE_BYTES and m.perms == "-w-s")
    return checks.equal("1.2 doorbell windows", answer, truth,
                        hint="Count rows whose node is /dev/nvidia0, size 64 KiB and perms -w-s (write-only, shared).",
                        why="the usermode region is 64 KiB and the library only ever writes to it: the doorbell.")


def pageable_cpu_seconds(answer, cpu_data: dict) -> bool | None:
    """1.3: CPU seconds (user + sys) to upload 4 GB from pageable memory with a blocking wait."""
    pg = cpu_time.lookup(cpu_data, "blocking", "pageable", "h2d")
    expected = 4 * (pg["user_s_per_gb"] + pg["sys_s_per_gb"])
    return checks.close("1.3 CPU seconds for 4 GB", answer, expected, rel_tol=0.05,
                        hint="(user + sys) ms per GB, times 4 GB, in seconds.",
                        hints=[factor_hint(1000, "That is milliseconds: the table gives ms per GB; divide by 1000."),
                               factor_hint(0.25, "That is one GB's worth: the question asks for 4 GB.")],
                        why="with a blocking wait the thread sleeps while the GPU works, so what CPU time remains is "
                            "the CPU's own copying into the staging buffers.")


MAP_OPTIONS = {
    "a": "/dev/nvidiactl, because the NV_ESC_RM_MAP_MEMORY ioctl was made on it.",
    "b": "The file whose descriptor the ioctl's argument names: for the doorbell, an open /dev/nvidia0.",
    "c": "/dev/nvidia-uvm, which maps everything the GPU can see.",
    "d": "Any of them: the kernel finds the validated mapping by its address.",
}
MAP_WHY = {
    "a": "No: the ioctl always goes to /dev/nvidiactl (the resource manager's escapes are control-device only), but "
         "it does not record the permission there. Its argument carries a second file descriptor, and the driver "
         "stores the validated mapping on that file.",
    "b": "Yes: the argument of NV_ESC_RM_MAP_MEMORY carries a file descriptor, the driver records the mapping context "
         "on that file, and the mmap that follows is made on it. The chapter's trace shows the ioctl on "
         "/dev/nvidiactl and the doorbell mapping on /dev/nvidia0.",
    "c": "No: /dev/nvidia-uvm serves the unified-memory driver's own ranges (offset equal to address); the "
         "resource manager's mappings go through nvidiactl and nvidiaN.",
    "d": "No: the driver keeps one pending mapping context per open file and checks the mmap against it; an mmap "
         "on a file without a validated context is refused.",
}


def map_memory_question(answer) -> bool | None:
    """1.4: which file the mmap after NV_ESC_RM_MAP_MEMORY must be made on."""
    return checks.choice("1.4 which file gets the mapping", answer, MAP_OPTIONS, "b", MAP_WHY)


PINNED_TRIALS = ((0, 4096), (3, 4096), (2, 1 << 20))


def _standin_problems(fn) -> list[str]:
    """Run the loop on the stand-in CuPy (copy_standin) and judge what it did: every copy's
    host side pinned, both copies and a kernel in every round, 8s back. Each case is judged
    after the loop ran, in a call of its own (checks.learner_first)."""
    return checks.learner_first(PINNED_TRIALS, lambda case: copy_standin.run(fn, *case), _judge_standin)


def _judge_standin(case: tuple[int, int], ran: tuple[object, copy_standin.Log]) -> list[str]:
    (rounds, n), (got, log) = case, ran
    h2d = [c for c in log.copies if c.kind == copy_standin.H2D]
    d2h = [c for c in log.copies if c.kind == copy_standin.D2H]
    if rounds and (len(h2d) < rounds or len(d2h) < rounds):
        return [f"with rounds={rounds} your loop made {len(h2d)} host->device and {len(d2h)} device->host "
                "copies: keep both copies (rt.memcpy in and out) in every round."]
    unpinned = [c for c in log.copies if not c.host_pinned]
    if unpinned:
        which = "host->device" if unpinned[0].kind == copy_standin.H2D else "device->host"
        return [f"{len(unpinned)} of {len(log.copies)} copies (the first a {which} copy) used pageable host "
                "memory: allocate both host buffers with cupyx.empty_pinned (then fill the input with 7)."]
    if rounds and log.launches < rounds:
        return [f"with rounds={rounds} the kernel ran {log.launches} times: keep dev += 1 in the loop."]
    return _not_true(got, rounds, n, "")


def _not_true(got, rounds: int, n: int, where: str) -> list[str]:
    return [] if got is True else [f"{where}copy_loop_pinned({rounds}, {n}) returned {got!r}, not True: did the "
                                   "input hold 7, and did the kernel run between the copies?"]


def _gpu_problems(fn) -> list[str]:
    try:
        return checks.learner_first(PINNED_TRIALS, lambda case: fn(*case),
                                    lambda case, got: _not_true(got, *case, "on the GPU, "))
    finally:
        gpu.release_pools()


def _pinned_loop_problems(fn) -> list[str]:
    problems = _standin_problems(fn)
    if problems:
        return problems
    if not gpu.probe().usable:
        print("  (no GPU here: your loop ran on a stand-in CuPy that records each copy and whether its host "
              "memory was pinned (SIMULATED); on a GPU the check also runs it for real)")
        return []
    return _gpu_problems(fn)


def pinned_loop_exercise(fn) -> bool | None:
    """1.5: the learner's copy loop from pinned memory, run on a stand-in CuPy that records what it
    did (and, on a GPU, also for real)."""
    return checks.code("1.5 a pinned copy loop", fn, _pinned_loop_problems,
                       why="live, pass it to ctx.get('path.syscall_census', code=copy_loop_pinned) to count its "
                           "system calls: pinned or not, the copies make none.")
