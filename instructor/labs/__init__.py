"""Reference implementations of the labs (one module per lab) and their hidden grading cases.

Each module holds the lab's answers (the functions a student writes) and `cases(part, seed)`:
inputs the student has not seen, with the expected results computed by the reference. The
labs' graded cells call them between nbgrader's `### BEGIN HIDDEN TESTS` markers, so they
run only when an instructor grades, and swap in the reference for earlier parts
(`earlier(part)`), so that one bug costs one part.
"""
