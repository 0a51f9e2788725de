"""`python -m helpers.measure.kernel_vm build|run|record` — the kernel lab from a shell.

  build                      fetch Debian's packages and build the bundle (build/kernel_lab/), and the
                             guest's Python for machines that run Python (python.cpio.gz)
  run MACHINE [k=v ...]      boot once (a machine of machines.py: gem, evict, ...) and print the probe's JSON (kl.k=v on the kernel command line)
  record [--only GLOB]       run the kernel-lab experiments in the VM and write their transcripts
                             to data/kernel_lab/<id>.json (what replay reads where QEMU is absent)
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time

from helpers.core import config, experiments, transcript
from helpers.core.errors import CourseError
from helpers.measure import kernel_vm
from helpers.measure.kernel_vm import bundle, guest_python


def kernel_lab_experiments() -> list[experiments.Experiment]:
    """The registered experiments whose recordings are kernel-lab transcripts."""
    return [e for e in experiments.discover().values() if e.reference == experiments.KERNEL_LAB_REFERENCE]


def record(only: list[str], argv: list[str]) -> int:
    chosen = [e for e in kernel_lab_experiments() if not only or any(fnmatch.fnmatch(e.id, g) for g in only)]
    if not chosen:
        print(f"record: no kernel-lab experiment matches {only}", file=sys.stderr)
        return 2
    hint = config.qemu_missing()
    if hint:
        print(f"record: refusing to record without QEMU — {hint}", file=sys.stderr)
        return 2
    for e in chosen:
        t0 = time.monotonic()
        print(f"{e.id}: {e.title}", flush=True)
        data = e.run(False)
        out = transcript.write(e.id, e.title, data, data["vm"], ["python", "-m", "helpers.measure.kernel_vm", *argv])
        print(f"    wrote {out} in {time.monotonic() - t0:.1f} s (boot {data['vm']['boot_seconds']} s, "
              f"{data['vm']['accel']})", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m helpers.measure.kernel_vm", description=__doc__.splitlines()[0],
                                 epilog=__doc__.split("\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build")
    r = sub.add_parser("run")
    r.add_argument("machine", choices=sorted(kernel_vm.machines.MACHINES))
    r.add_argument("params", nargs="*", metavar="k=v")
    rec = sub.add_parser("record")
    rec.add_argument("--only", action="append", default=[], metavar="GLOB")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            b = bundle.ensure()
            guest_python.ensure()  # the edu machine's interpreter (Chapters 2b and 4b, Lab 6)
            print(json.dumps(b.manifest, indent=1))
            return 0
        if args.cmd == "run":
            params = dict(p.split("=", 1) for p in args.params if "=" in p)
            print(json.dumps(kernel_vm.run(args.machine, {"run": args.machine, **params}), indent=1))
            return 0
        return record(args.only, argv)
    except CourseError as exc:
        print(f"kernel lab: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
