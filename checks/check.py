"""The record of one check: an example the user wrote (a call and the value it should give), as data."""

from __future__ import annotations

from dataclasses import dataclass

MAX_CHECKS = 24  # per request: running them is cheap, but a prompt of 500 examples is not a prompt
MAX_USER_CHECK_CHARS = 2000

VALUE, OUTPUT, TRUTHY = "value", "output", "truthy"  # how a check's expected value is compared
STATED = "stated"  # the origin of a check a candidate states about its own code (checks/stated.py)


@dataclass(frozen=True)
class Check:
    """One example: evaluate `expression` after `setup` in the candidate's code and compare with `expected`."""

    line: int  # 1-based line of the example in the code the user wrote
    expression: str  # an expression of `language`, e.g. "add(2, 3)"
    expected: str  # VALUE: an expression of `language`; OUTPUT: doctest's printed text; TRUTHY: ""
    compare: str = VALUE  # VALUE (equal values, numbers within 1e-6), OUTPUT (repr or printed text), TRUTHY (assert)
    origin: str = "inline"  # "doctest", "inline", "phrase", "input/output", "table", "assert" (the user's) or STATED
    setup: tuple[str, ...] = ()  # statements run first (Python doctest lines such as `>>> x = [1, 2]`)
    language: str = "python"  # the id (languages.py) of the language `expression` and `expected` are written in

    def as_dict(self) -> dict:
        return {
            "line": self.line,
            "expression": self.expression,
            "expected": self.expected,
            "compare": self.compare,
            "origin": self.origin,
            "setup": list(self.setup),
            "language": self.language,
        }

    @staticmethod
    def from_dict(row: dict) -> Check:
        """The check `as_dict` wrote."""
        return Check(**{**row, "setup": tuple(row.get("setup", ()))})

    def label(self) -> str:
        """How the check reads to a user, e.g. "add(2, 3) == 5"."""
        if self.compare == TRUTHY:
            return f"assert {self.expression}"
        return f"{self.expression} == {self.expected}" if self.compare == VALUE else f">>> {self.expression}"
