"""A lab check's case: a name for the feedback, its inputs, and the expected result.

The published examples of a lab (helpers.labs.labN) and the instructor's hidden cases
(instructor.labs.labN.cases) have this one shape, so a graded cell runs either list the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Case:
    """`case.name`, `case.want`, and every input as an attribute (`case.M`, `case.transfers`)."""

    name: str
    inputs: dict = field(default_factory=dict)
    want: object = None

    def __getattr__(self, key):
        inputs = self.__dict__.get("inputs", {})
        if key in inputs:
            return inputs[key]
        raise AttributeError(f"case {self.__dict__.get('name')!r} has no input {key!r}")
