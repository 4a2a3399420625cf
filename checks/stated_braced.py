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


def _statements(code: str, language: str) -> list[tuple[int, int, bool | None]]:
    """The top-level statements of a script: (first line, line after the last, whether it runs test code: True
    where it calls the candidate's own functions, prints, asserts or declares tests outside a definition; None for
    blank and comment lines)."""
    functions = own_functions(code, language)
    masked = clike.mask(code).splitlines(keepends=True)
    defined = braced.definitions(code, language)
    found, depth, start = [], 0, None
    for number, line in enumerate(masked):
        start = number if start is None else start
        depth = max(depth + sum(line.count(c) for c in "{([") - sum(line.count(c) for c in "})]"), 0)
        if depth == 0:
            text = "".join(masked[start : number + 1]).strip()
            runs = start not in defined and bool(_TEST_CALL.match(text) or braced.calls(text, functions))
            found.append((start, number + 1, runs if text else None))
            start = None
    if start is not None:
        found.append((start, len(masked), False))  # an unclosed statement: the code as it is
    return found


def function_only(code: str, language: str) -> str:
    """The candidate without the top-level statements that run its test code (JavaScript, TypeScript: those that
    call its own functions, print, assert or declare tests); other languages' code as it is."""
    if language not in _SCRIPTS:
        return code
    lines = code.splitlines(keepends=True)
    return "".join("".join(lines[a:b]) for a, b, runs in _statements(code, language) if not runs)


def split_usage(code: str, language: str) -> tuple[str, str]:
    """(the code, its usage) of a script whose test statements all follow its other code (the comments just above
    them go with them), as checks/stated.split_usage does for Python; else (code, "")."""
    if language not in _SCRIPTS:
        return code, ""
    statements = _statements(code, language)
    tests = [index for index, (_, _, runs) in enumerate(statements) if runs]
    if not tests or any(runs is False for _, _, runs in statements[tests[0] :]):
        return code, ""
    first = tests[0]
    while first > 0 and statements[first - 1][2] is None:
        first -= 1  # the blank and comment lines above the tests
    cut = statements[first][0]
    if not any(runs is False for _, _, runs in statements[:first]):
        return code, ""  # nothing but test code
    lines = code.splitlines(keepends=True)
    return "".join(lines[:cut]).rstrip() + "\n", "".join(lines[cut:]).strip("\n") + "\n"
