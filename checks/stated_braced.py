"""The checks a JavaScript or TypeScript candidate states about its own functions (checks/stated.py is Python's),
and the candidate without its top-level test code. The forms are those a user's check line is written in
(checks/braced.ASSERTS: `assert.strictEqual(f(x), y)`, `console.assert(f(x) === y)`, `assert(f(x))`), one to a line,
anywhere in the code, and `console.log(f(x)); // y` with the value stated in the comment (`// Output: y`, `// => y`).
Conservative, as the prompt's examples are read: only a call of one of the candidate's own functions (not `main`, not
a test function without parameters) with plain literal arguments, against a literal value, is read.

The compiled languages are not read: their checks are built into one program with the candidate (checks/programs.py),
so one row's check that does not type against another row's signature would fail every check of that row.

A script's top-level statements run when it loads, so `function_only` drops those that run its test code (read from
tree-sitter's tree of the script, so that regular expressions, templates and statements over several lines are
whole), and `split_usage` sets them apart where they follow the rest.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache

from tree_sitter import Language, Parser

import languages
from checks import braced, clike
from checks.check import MAX_CHECKS, STATED, TRUTHY, VALUE, Check

SCRIPTS = ("javascript", "typescript", "tsx")  # the languages read here: their top-level statements run on load
TEST_NAME = re.compile(r"^(?:test|check)|^main$", re.IGNORECASE)  # a test function's name (without parameters)
# what a comment says before the value it states: `Output: 5`, `=> 5`, `should be 5`, `5`
STATEMENT = re.compile(
    r"^\s*(?:(?:expected|expect|output|result|returns?|prints?|answer|gives|logs?)\s*(?:output)?\s*[:=]?\s*|"
    r"->\s*|=>\s*|should\s+(?:be|return|print|log)\s+|===?\s*)?",
    re.IGNORECASE,
)
_LOGGED = re.compile(r"^console\.log\s*\(")


def own_functions(code: str, language: str) -> set[str]:
    """The functions the candidate defines, less `main` and test functions (test... or check... without
    parameters: `checkPrime(n)` is an answer)."""
    lines = code.split("\n")
    return {
        name
        for number, name in braced.definitions(code, language).items()
        if not (TEST_NAME.search(name) and _no_parameters(lines[number], name))
    }


def _no_parameters(line: str, name: str) -> bool:
    return bool(re.search(re.escape(name) + r"\s*(?:=\s*(?:async\s+)?(?:function\s*)?)?\(\s*\)", line))


def stated_checks(code: str, language: str) -> list[Check]:
    """The checks the candidate's lines state (see the module's docstring), in line order, at most MAX_CHECKS."""
    if language not in SCRIPTS:
        return []
    functions = own_functions(code, language)
    if not functions:
        return []
    found = {}
    for number, line in enumerate(code.split("\n"), start=1):
        check = _line_check(number, line.strip(), functions, language)
        if check is not None and _plain(check, functions):
            found.setdefault((check.expression, check.expected, check.compare), check)
    return list(found.values())[:MAX_CHECKS]


def _line_check(number: int, line: str, functions: set[str], language: str) -> Check | None:
    if len(line) > braced.MAX_LINE_CHARS or not braced.calls(line, functions):
        return None
    if _LOGGED.match(line):
        return _logged(number, line, language)
    try:
        check = braced.user_check(number, line, language)
    except ValueError:
        return None  # not an assert line
    if not line.startswith(("assert", "console.assert")):
        return None  # a bare expression (`f(2) === 4;`) states nothing
    return replace(check, origin=STATED)


def _plain(check: Check, functions: set[str]) -> bool:
    """The check's expression is a call of an own function with literal arguments, its expected value a literal."""
    call = re.match(r"([A-Za-z_$][\w$]*)\s*\(", check.expression)
    whole = call is not None and clike.closing(check.expression, call.end() - 1) == len(check.expression)
    if not whole or call.group(1) not in functions or not braced.plain_call(check.expression, call.group(1)):
        return False
    return check.compare == TRUTHY or braced.literal_prefix(check.expected) == check.expected


def _logged(number: int, line: str, language: str) -> Check | None:
    """`console.log(f(x)); // y`: a VALUE check of the one argument against the comment's stated value."""
    close = clike.closing(line, line.index("("))
    comment = re.match(r"\s*;?\s*//(.*)$", line[close:]) if close is not None else None
    if comment is None:
        return None
    arguments = clike.split_top_level(line[line.index("(") + 1 : close - 1])
    text = comment.group(1).strip()
    expected = braced.literal_prefix(text[STATEMENT.match(text).end() :])
    if len(arguments) != 1 or expected is None:
        return None
    return Check(number, arguments[0], expected, VALUE, STATED, (), language)


@cache
def _parser(language: str) -> Parser:
    return Parser(Language(languages.resolve(language).grammar.load()))


def _rows(code: str, language: str) -> list[bool | None] | None:
    """Per line of a script (split at `\\n` only), whether it belongs to top-level test code: True for a call
    statement (`f(2);`, `console.log(...)`, `main();`), a declaration initialised by a call of the script's own
    functions (`let r = f(2);`) or Node's main guard; False for other code (definitions, classes, imports,
    `module.exports`); None for blank and comment lines. None where the script does not parse."""
    tree = _parser(language).parse(code.encode("utf-8"))
    if tree.root_node.has_error:
        return None
    defined = set(braced.definitions(code, language).values())
    rows: list[bool | None] = [None] * len(code.split("\n"))
    for node in tree.root_node.children:
        if node.type == "comment":
            continue
        runs = _runs_tests(node, defined)
        for row in range(node.start_point[0], node.end_point[0] + 1):
            rows[row] = runs if rows[row] is None else rows[row] or runs
    return rows


def _runs_tests(node, defined: set[str]) -> bool:
    if node.type == "expression_statement":
        expression = node.named_children[0] if node.named_children else None
        if expression is not None and expression.type == "await_expression" and expression.named_children:
            expression = expression.named_children[0]
        return expression is not None and expression.type == "call_expression"
    if node.type in ("lexical_declaration", "variable_declaration"):
        values = [d.child_by_field_name("value") for d in node.named_children if d.type == "variable_declarator"]
        return any(_calls_defined(v, defined) for v in values if v is not None)
    if node.type == "if_statement":
        condition = node.child_by_field_name("condition")
        return condition is not None and b"require.main" in condition.text
    return False


def _calls_defined(value, defined: set[str]) -> bool:
    """A declaration's value is a call of one of the script's own functions, with no function among its arguments
    (`const fib = memoize(function ...)` defines)."""
    if value.type == "await_expression" and value.named_children:
        value = value.named_children[0]
    callee = value.child_by_field_name("function") if value.type == "call_expression" else None
    if callee is None or callee.type != "identifier" or callee.text.decode() not in defined:
        return False
    arguments = value.child_by_field_name("arguments")
    kinds = {"arrow_function", "function_expression", "function"}
    return arguments is None or not any(a.type in kinds for a in arguments.named_children)


def function_only(code: str, language: str) -> str:
    """The candidate without the top-level statements that run its test code (JavaScript, TypeScript: see `_rows`);
    other languages' code, and a script that does not parse, as it is."""
    rows = _rows(code, language) if language in SCRIPTS else None
    if rows is None:
        return code
    return "\n".join(line for line, runs in zip(code.split("\n"), rows) if not runs)


def split_usage(code: str, language: str) -> tuple[str, str]:
    """(the code, its usage) of a script whose test statements all follow its other code (the comments just above
    them go with them), as checks/stated.split_usage does for Python; else (code, "")."""
    rows = _rows(code, language) if language in SCRIPTS else None
    if rows is None or True not in rows:
        return code, ""
    cut = rows.index(True)
    if False in rows[cut:] or False not in rows[:cut]:
        return code, ""  # code after the tests, or nothing but tests
    lines = code.split("\n")
    while cut > 0 and rows[cut - 1] is None and lines[cut - 1].strip():
        cut -= 1  # the comment lines just above the tests
    return "\n".join(lines[:cut]).rstrip() + "\n", "\n".join(lines[cut:]).strip("\n") + "\n"
