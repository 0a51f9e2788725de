"""The lab grader: each submission runs in a sandboxed worker; the checks run here.

- `sandbox`: the bubblewrap command and resource limits one submission's worker runs under.
- `session`: the grader's end of the worker protocol (helpers.labs.worker), with deadlines.
- `api`: what a lab's graded parts are written against (`Part`, `Student`, `StudentRaised`).
- `submission`: a submitted notebook's solution cells, read as data.
- `classrun`: a whole class, one report line per check, every student listed.
- `feedback`: a student's feedback page (what the hub's exchange hands back).

labs/README.md ("Adding a lab to the grader") describes what a lab provides.
"""
