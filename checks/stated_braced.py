"""The checks a candidate in a braced language states about its own functions (checks/stated.py is Python's), and
the candidate without its top-level test code. The forms are those a user's check line is written in
(checks/braced.ASSERTS: `assert.strictEqual(f(x), y)`, `console.assert(f(x) === y)`, `assert_eq!(f(x), y)`,
`assert(f(x) == y)`, Java's `assert f(x) == y`), one to a line, anywhere in the code (a `main`, a test function, the
top level), and JavaScript's `console.log(f(x)); // y` with the value stated in the comment (`// Output: y`,
`// => y`). Only a line that calls one of the candidate's own functions (not `main`, not a test...) is read.

A compiled language's harness renames the candidate's own `main` (checks/programs.py), so its test code never runs
beside the checks; a JavaScript candidate's top-level statements run when it loads, so `function_only` drops those
that call its functions, print or assert.
"""

from __future__ import annotations

import re
from dataclasses import replace

from checks import braced, clike
from checks.check import MAX_CHECKS, VALUE, Check

STATED = "stated"  # Check.origin of a candidate's own check (as checks/stated.py's)
_TEST_NAME = re.compile(r"^(?:test|check)|^main$", re.IGNORECASE)
_LOGGED = re.compile(r"^console\.log\s*\(")
_STATEMENT = re.compile(
    r"^\s*(?:(?:expected|expect|output|result|returns?|prints?|answer|gives|logs?)\s*[:=]?\s*|->\s*|=>\s*|"
    r"should\s+(?:be|return|print|log)\s+|===?\s*)?",
    re.IGNORECASE,
)
_SCRIPTS = ("javascript", "typescript", "tsx")  # languages whose top-level statements run when the code loads
_TEST_CALL = re.compile(r"^(?:console\.|assert\b|assert\.|test\s*\(|it\s*\(|describe\s*\()")


def own_functions(code: str, language: str) -> set[str]:
    """The functions the candidate defines, less `main` and test functions."""
    return {name for name in braced.definitions(code, language).values() if not _TEST_NAME.search(name)}


def stated_checks(code: str, language: str) -> list[Check]:
    """The checks the candidate's lines state (see the module's docstring), in line order, at most MAX_CHECKS."""
    if not braced.reads_asserts(language):
        return []
    functions = own_functions(code, language)
    if not functions:
        return []
    found = {}
    for number, line in enumerate(code.splitlines(), start=1):
        check = _line_check(number, line.strip(), functions, language)
        if check is not None:
            found.setdefault((check.expression, check.expected, check.compare), check)
    return list(found.values())[:MAX_CHECKS]


def _line_check(number: int, line: str, functions: set[str], language: str) -> Check | None:
    if len(line) > braced.MAX_LINE_CHARS or not braced.calls(line, functions):
        return None
    if language in _SCRIPTS and _LOGGED.match(line):
        return _logged(number, line, language)
    try:
        check = braced.user_check(number, line, language)
    except ValueError:
        return None  # not an assert line
    if check.origin != "assert" or not line.startswith(("assert", "console.assert", "debug_assert")):
        return None  # a bare expression (`f(2) == 4;`) states nothing
    if not braced.calls(check.expression, functions) or braced.calls(check.expected, functions):
        return None
    return replace(check, origin=STATED)


def _logged(number: int, line: str, language: str) -> Check | None:
    """`console.log(f(x)); // y`: a VALUE check of the one argument against the comment's stated value."""
    close = clike.closing(line, line.index("("))
    comment = re.match(r"\s*;?\s*//(.*)$", line[close:]) if close is not None else None
    if comment is None:
        return None
    arguments = clike.split_top_level(line[line.index("(") + 1 : close - 1])
    text = comment.group(1).strip()
    expected = braced.literal_prefix(text[_STATEMENT.match(text).end() :])
    if len(arguments) != 1 or expected is None:
        return None
    return Check(number, arguments[0], expected, VALUE, STATED, (), language)


def function_only(code: str, language: str) -> str:
    """The candidate without the top-level statements that run its test code (JavaScript, TypeScript: those that
    call its own functions, print, assert or declare tests); other languages' code as it is."""
    if language not in _SCRIPTS:
        return code
    functions = own_functions(code, language)
    lines = code.splitlines(keepends=True)
    masked = clike.mask(code).splitlines(keepends=True)
    defined = braced.definitions(code, language)
    kept, depth, start = [], 0, None
    for number, line in enumerate(masked):
        if depth == 0 and start is None:
            start = number
        depth = max(
            depth
            + line.count("{")
            + line.count("(")
            + line.count("[")
            - line.count("}")
            - line.count(")")
            - line.count("]"),
            0,
        )
        if depth == 0 and start is not None:
            statement = "".join(masked[start : number + 1]).strip()
            runs_tests = start not in defined and (_TEST_CALL.match(statement) or braced.calls(statement, functions))
            if not runs_tests:
                kept += lines[start : number + 1]
            start = None
    kept += lines[start:] if start is not None else []
    return "".join(kept)
