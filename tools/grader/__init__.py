"""The lab grader, the host side of grading: each submission runs in a sandboxed worker
(helpers.labs.grading.worker, the learner side); the checks run here. `python -m tools.grader
student|grade|run-student|lint` is its command line (`labgrade`).

- `labgrade`: the command line: student versions (nbgrader), grading a folder, the lab-format lint.
- `sandbox`: the bubblewrap command and resource limits one submission's worker runs under.
- `session`: the grader's end of the worker protocol (helpers.labs.grading.worker), with deadlines.
- `api`: what a lab's graded parts are written against (`Part`, `Student`, `StudentRaised`).
- `submission`: each student's folder read once without following links; a notebook's solution
  cells, read as data.
- `ownwork`: the "your own work" rule, as redacted course modules in that part's worker.
- `memcap`: one memory cap for a whole worker (cgroup v2, else a watchdog over its processes).
- `classrun`: a whole class, one report line per check, every student listed.
- `feedback`: a student's feedback page (what the hub's exchange hands back).

labs/README.md ("Adding a lab to the grader", "The authoring API") describes what a lab provides.
"""
