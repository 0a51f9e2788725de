"""Chapter 1's exercises: the expected values come from the chapter's Evidence here, never from
the page (helpers.core.checks explains the kinds)."""

from __future__ import annotations

from helpers.ch01_path_of_a_copy import cpu_time, driver_maps, syscalls
from helpers.core import checks, gpu, shown
from helpers.core.checks import factor_hint


def extra_ioctls(answer, census_data: dict) -> bool | None:
    """1.1: how many more ioctl calls 1000 round trips make than none, by the fitted slope."""
    expected = round(syscalls.growth(census_data, "ioctl").per_round * 1000)
    try:
        given = None if answer is None else round(float(answer))
    except (TypeError, ValueError):
        given = answer
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


PINNED_ALLOCATORS = ("empty_pinned", "zeros_pinned", "alloc_pinned_memory", "hostRegister", "empty_like_pinned")
PINNED_TRIALS = ((0, 4096), (3, 4096), (2, 1 << 20))


def _pinned_loop_problems(fn) -> list[str]:
    text = shown.source_of(fn) or ""
    problems = []
    if not any(a in text for a in PINNED_ALLOCATORS):
        problems.append("the host buffers are still pageable: allocate them with cupyx.empty_pinned (then fill the "
                        "input with 7 so that 8 comes back).")
    if text.count("memcpy") < 2:
        problems.append("keep both copies (rt.memcpy in and out), so the loop is still a round trip.")
    if problems:
        return problems
    if not gpu.probe().usable:
        print("  (runs on a GPU only: without one the check read your loop's text, it did not run it)")
        return []
    try:
        for rounds, n in PINNED_TRIALS:
            got = fn(rounds, n)
            if got is not True:
                problems.append(f"copy_loop_pinned({rounds}, {n}) returned {got!r}, not True: did the input hold 7, "
                                "and did the kernel run between the copies?")
                break
    finally:
        gpu.release_pools()
    return problems


def pinned_loop_exercise(fn) -> bool | None:
    """1.5: the learner's copy loop from pinned memory (run on a GPU; read, not run, without one)."""
    return checks.code("1.5 a pinned copy loop", fn, _pinned_loop_problems,
                       why="live, pass it to ctx.get('path.syscall_census', code=copy_loop_pinned) to count its "
                           "system calls: pinned or not, the copies make none.")
