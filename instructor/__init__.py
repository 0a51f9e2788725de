"""Instructor-only material: reference implementations of the labs' answers, hidden grading
cases, the --solve answers of per-learner problems, notes per chapter and the syllabus.

Nothing here is handed to students: `make student-repo DEST=...` (tools/dist/studentdist.py) leaves
this folder out and fails if any function of it, normalised, appears in what it writes. The
package is found from the repository root (pytest, `make grade`, the labs' hidden tests through
`helpers.labs.grading.integrity.reference`); the installed `helpers` package does not contain it.
"""
