"""Checks as data: the examples a prompt's docstrings and comments state (a call and its expected value), and the
assert lines a user gives. Conservative: what cannot be read as a call of one of the code's own top-level
functions and an expected value is left out, never guessed.

Forms read (in docstrings and in comments alike):
- doctest: `>>> expr` (with `...` continuation lines) and the output lines below it; earlier `>>>` statements of
  the same function (`>>> x = 3`) are kept as the check's setup;
- inline: `f(x) == y`, `f(x) -> y`, `f(x) => y`, `f(x) ➞ y`, `f(x) → y`, `f(x) returns y`, `f(x) gives y`,
  `f(x) should return y`, `f(x) is y`, `f(x) = y`, `f(x): y`, anywhere in a line ("for example, f(3) gives 7");
- argument phrases for the function the line belongs to: "given 'ab' the result is 'ba'", "for lst = [1,2] the
  output should be 3", "if the input is 5, the function returns 120";
- input/output pairs: `Input: nums = [1, 2], k = 1` then `Output: 3` (same line or the next two);
- a table whose header names input and output columns: `| input | output |` rows.
"""

from __future__ import annotations

import ast
import builtins
import re

import languages
from checks import braced
from checks.check import MAX_CHECKS, MAX_USER_CHECK_CHARS, OUTPUT, TRUTHY, VALUE, Check

# --- which names an example may use -----------------------------------------------------------------------------

_DEF = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(([^)]*)", re.MULTILINE)
_BUILTINS = frozenset(dir(builtins))


def top_level_functions(code: str) -> dict[str, list[str]]:
    """Names of the functions defined at column 0, with their parameter names (as far as one line shows them)."""
    found = {}
    for match in _DEF.finditer(code):
        params = [p.split(":")[0].split("=")[0].strip().lstrip("*") for p in match.group(2).split(",")]
        found[match.group(1)] = [p for p in params if p and p != "/"]
    return found


def _uses_only(expression: ast.AST, functions: set[str], extra: set[str]) -> bool:
    """The expression calls one of `functions` and reads no name beyond them, builtins and `extra`."""
    names = {node.id for node in ast.walk(expression) if isinstance(node, ast.Name)}
    calls = {
        node.func.id for node in ast.walk(expression) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    return bool(calls & functions) and names <= functions | _BUILTINS | extra


PARSE_ERRORS = (SyntaxError, ValueError, TypeError, MemoryError, RecursionError)  # what odd text makes ast raise


def _parse_expression(text: str) -> ast.Expression | None:
    try:
        return ast.parse(text.strip(), mode="eval")
    except PARSE_ERRORS:
        return None


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False
    return True


_PROSE_LITERALS = {"true": "True", "false": "False", "null": "None", "none": "None"}


def literal_prefix(text: str) -> str | None:
    """The longest start of `text` that is a Python literal (not a bare tuple: "7, and 9" gives "7"), or None.
    A lone true, false, null or none, as docstrings write them in prose, is read as the Python value."""
    text = text.strip()
    word = re.match(r"([A-Za-z]+)[\s.,;]*$", text)
    if word and word.group(1).lower() in _PROSE_LITERALS:
        return _PROSE_LITERALS[word.group(1).lower()]
    cuts = sorted({len(text)} | {m.start() for m in re.finditer(r"[\s,;]", text)}, reverse=True)
    for cut in cuts:
        head = text[:cut].rstrip(" \t.;,")
        if not head or not _is_literal(head):
            continue
        tree = _parse_expression(head)
        if isinstance(tree.body, ast.Tuple) and not head.startswith("("):
            continue  # "1, 2" is more likely two values of a sentence than one tuple
        return head
    return None


# --- the lines examples are written in ----------------------------------------------------------------------

_QUOTES = re.compile(r'^[rRuUbB]?("""|\'\'\')|("""|\'\'\')$')


def text_view(line: str) -> str:
    """A line as prose: indentation, a comment's `#` and docstring quotes removed."""
    text = line.strip()
    if text.startswith("#"):
        text = text.lstrip("#").strip()
    return _QUOTES.sub("", text).strip()


# a Markdown code mark: a backtick that opens (after a blank or the start, before a non-blank) or closes (after a
# non-blank, before a blank, the end or a sentence's mark); one beside a quote or inside a word is text ('`x`')
_CODE_MARK = re.compile(r"(?:(?<=^)|(?<=[\s(]))`(?=[^\s`])|(?<=[^\s`'\"])`(?=$|[\s,.;:)!?])")


def prose_view(text: str) -> str:
    """A line of the view as the prose forms read it: Markdown's code marks around a call or a value removed (a
    doctest's lines are left as they are)."""
    if text.startswith((">>>", "...", "```")):
        return text
    return _CODE_MARK.sub("", text)


def _regions(lines: list[str]) -> list[str | None]:
    """For each line, the name of the top-level function it belongs to (None outside one): a `def` at column 0
    starts one; other code at column 0 (not a comment, decorator or closing bracket or quote) ends it."""
    current, owner = None, []
    for line in lines:
        match = _DEF.match(line)
        if match:
            current = match.group(1)
        elif line[:1] not in ("", " ", "\t", "#", "@", ")", "]", "}", '"', "'"):
            current = None
        owner.append(current)
    return owner


# --- the forms ------------------------------------------------------------------------------------------------


def _doctests(view: list[str], owner: list[str | None], functions: set[str]) -> list[Check]:
    found, setup, setup_owner = [], [], None
    index = 0
    while index < len(view):
        if not view[index].startswith(">>>"):
            index += 1
            continue
        if owner[index] != setup_owner:
            setup, setup_owner = [], owner[index]
        start, source = index, view[index][3:].strip()
        index += 1
        while index < len(view) and view[index].startswith("..."):
            source += "\n" + view[index][3:].strip()
            index += 1
        output = []
        while index < len(view) and view[index] and not view[index].startswith(">>>"):
            output.append(view[index])
            index += 1
        check = _doctest_check(start + 1, source, output, functions, setup)
        if check is not None:
            found.append(check)
        elif not output and _is_statement(source):
            setup.append(source)
    return found


def _is_statement(source: str) -> bool:
    try:
        tree = ast.parse(source)
    except PARSE_ERRORS:
        return False
    return bool(tree.body) and not isinstance(tree.body[-1], ast.Expr)


def _assigned(setup: list[str]) -> set[str]:
    names = set()
    for statement in setup:
        for node in ast.walk(ast.parse(statement)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
                names.update(
                    getattr(node, "name", None)
                    and [node.name]
                    or [(a.asname or a.name).split(".")[0] for a in getattr(node, "names", [])]
                )
    return names


def _doctest_check(line: int, source: str, output: list[str], functions: set[str], setup: list[str]) -> Check | None:
    tree = _parse_expression(source)
    if tree is None or not _uses_only(tree, functions, _assigned(setup)):
        return None
    test = tree.body
    if not output and isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        expected = ast.unparse(test.comparators[0])  # `>>> f(x) == y` written as the example itself
        if _is_literal(expected):
            return Check(line, ast.unparse(test.left), expected, VALUE, "doctest", tuple(setup))
    if not output:
        return None
    expected = "\n".join(output).strip()
    if expected.startswith("Traceback") or "..." in expected or expected.startswith("<"):
        return None  # exceptions, ellipses and object addresses: doctest options we do not guess at
    compare = VALUE if _is_literal(expected) else OUTPUT
    return Check(line, source.strip(), expected, compare, "doctest", tuple(setup))


_SEPARATOR = re.compile(
    r"^\s*(?:#\s*)?,?\s*(?:then\s+)?(==>|==|➞|⟶|→|⇒|⟹|=>|->|-->|"
    r"(?:should|must|will|would|is\s+expected\s+to)\s+(?:return|give|be|equal|output|produce|yield)|"
    r"gives\s+back|returns?\s+back|returns?|gives|yields|produces|results?\s+in|evaluates\s+to|outputs?|"
    r"(?:we|you|it|one)\s+(?:should\s+|will\s+|would\s+)?(?:get|gets|obtain|receive)|"
    r"(?:it|this|that)\s+(?:should\s+|will\s+|would\s+)?(?:returns?|gives?|yields?|outputs?)|"
    r"(?:the\s+)?(?:answer|result|output|return\s+value)\s+(?:is|should\s+be|will\s+be|would\s+be|=)|"
    r"is(?:\s+equal\s+to)?|equals|=|:)\s*:?\s*",
    re.IGNORECASE,
)
_ARROW = re.compile(
    r"^\s*(?:#\s*)?(==>|➞|⟶|→|⇒|⟹|=>|->|-->|returns\b|gives\b|yields\b|produces\b|"
    r"(?:expected|correct)?\s*(?:output|result|value|answer|return\s+value)?\s*:|expected\s*:?)\s*",
    re.IGNORECASE,
)
MAX_VALUE_LINES = 8  # a value written over several lines (a long list) is read that far


_QUOTED = languages.Lexis(strings=('"', "'"))  # an example line's strings (a docstring's `#` is no comment)


def _call_end(text: str, open_at: int) -> int | None:
    """Index just past the parenthesis that closes the one at `open_at` (outside the line's strings), or None."""
    depth = 0
    for index, char in enumerate(languages.mask(text[open_at:], _QUOTED), start=open_at):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _inline(view: list[str], functions: set[str]) -> list[Check]:
    if not functions:
        return []
    call_start = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(functions))) + r")\s*\(")
    found = []
    for number, text in enumerate(view, start=1):
        if text.startswith((">>>", "...", "def ", "async def ")):
            continue
        for match in call_start.finditer(text):
            end = _call_end(text, match.end() - 1)
            if end is None:
                continue
            call = _parse_expression(text[match.start() : end])
            if call is None or not _uses_only(call, functions, set()):
                continue
            expected = _expected_after(text[end:], view[number:])
            if expected is not None:
                found.append(Check(number, text[match.start() : end].strip(), expected, VALUE, "inline"))
    return found


def _expected_after(rest: str, below: list[str]) -> str | None:
    """The value a call's line states after the call (`rest`): after a separator, on that line or, where the line
    stops at the separator or inside an open bracket, over the lines `below`; or, for a call alone on its line,
    after an arrow that begins the next line (`f(x)` then `-> 5`)."""
    separator = _SEPARATOR.match(rest)
    if separator is None:
        arrow = _ARROW.match(below[0]) if below and not rest.strip() else None
        return literal_prefix(below[0][arrow.end() :]) if arrow else None
    value = rest[separator.end() :]
    expected = literal_prefix(value)
    if expected is not None or (value.strip() and value.strip()[0] not in "([{"):
        return expected
    lines = [value]
    for line in below[:MAX_VALUE_LINES]:
        if not line:
            break
        lines.append(line)
        expected = literal_prefix(" ".join(lines))
        if expected is not None:
            return ast.unparse(ast.parse(expected, mode="eval"))  # one line, as the value reads
    return None


_PHRASE = re.compile(
    r"\b(?:given|for|with|on|if|when(?:\s+given)?|passing)\s+(?:the\s+|an?\s+)?(?:input\s+(?:is\s+)?|argument\s+)?"
    r"(?P<args>.+?)\s*,?\s+(?:then\s+)?"
    r"(?:(?:the\s+)?(?:result|output|answer|return\s+value|function)\s+"
    r"(?:should\s+be|is|will\s+be|would\s+be|=|returns?|should\s+return|gives)|"
    r"(?:it|you|we|one)\s+(?:should\s+|will\s+|would\s+)?(?:get|gets|obtain|receive|returns?|gives?))"
    r"\s+(?P<expected>.+)$",
    re.IGNORECASE,
)
_INPUT = re.compile(
    r"^\s*input\s*:\s*(?P<args>.+?)(?:\s*(?:,|->|=>)?\s*output\s*:\s*(?P<expected>.+))?$", re.IGNORECASE
)
_OUTPUT = re.compile(r"^\s*output\s*:\s*(?P<expected>.+)$", re.IGNORECASE)


def _call_of(function: str, args: str, params: list[str]) -> str | None:
    """`function(args)` for the longest start of `args` (cut at a comma) that makes a valid call of literals whose
    keywords are the function's parameters ("N = 1000, the sum is 1" gives `f(N = 1000)`), else None."""
    cuts = sorted({len(args)} | {m.start() for m in re.finditer(",", args)}, reverse=True)
    for cut in cuts:
        call = _one_call(function, args[:cut], params)
        if call is not None:
            return call
    return None


def _one_call(function: str, args: str, params: list[str]) -> str | None:
    args = args.strip().rstrip(",")
    call = f"{function}({args})"
    tree = _parse_expression(call)
    if tree is None or not isinstance(tree.body, ast.Call):
        return None
    node = tree.body
    if not all(_is_literal(ast.unparse(a)) for a in node.args):
        return None
    if any(k.arg not in params or not _is_literal(ast.unparse(k.value)) for k in node.keywords):
        return None
    if not node.args and not node.keywords:
        return None
    return call


MAX_PHRASE_CHARS = 300  # a sentence with an example is short; longer lines are not read as phrases


def _phrases(view, owner, functions: dict[str, list[str]]) -> list[Check]:
    found = []
    for number, (text, function) in enumerate(zip(view, owner), start=1):
        if function is None or text.startswith(">>>") or len(text) > MAX_PHRASE_CHARS:
            continue
        match = _PHRASE.search(re.sub(r"\s+", " ", text))  # one blank between words: no costly backtracking
        if match is None:
            continue
        call = _call_of(function, match.group("args"), functions[function])
        expected = literal_prefix(match.group("expected"))
        if call is not None and expected is not None:
            found.append(Check(number, call, expected, VALUE, "phrase"))
    return found


def _input_output(view, owner, functions: dict[str, list[str]]) -> list[Check]:
    found = []
    for index, (text, function) in enumerate(zip(view, owner)):
        match = _INPUT.match(re.sub(r"\s+", " ", text)) if len(text) <= MAX_PHRASE_CHARS else None
        if function is None or match is None:
            continue
        expected_text = match.group("expected")
        for ahead in view[index + 1 : index + 3]:
            if expected_text is None and _OUTPUT.match(ahead):
                expected_text = _OUTPUT.match(ahead).group("expected")
        call = _call_of(function, match.group("args"), functions[function])
        expected = literal_prefix(expected_text or "")
        if call is not None and expected is not None:
            found.append(Check(index + 1, call, expected, VALUE, "input/output"))
    return found


_INPUT_COLUMNS = ("input", "call", "example", "expression", "argument", "args")
_OUTPUT_COLUMNS = ("output", "result", "return", "expected", "value")


def _column(cells: list[str], names: tuple[str, ...], other_than: int | None = None) -> int | None:
    return next((i for i, c in enumerate(cells) if i != other_than and any(name in c for name in names)), None)


def _tables(view, owner, functions: dict[str, list[str]]) -> list[Check]:
    """Rows of a table whose header names an input column (the arguments, or the whole call) and an output one."""
    found, columns = [], None
    for number, (text, function) in enumerate(zip(view, owner), start=1):
        cells = [c.strip() for c in text.strip().strip("|").split("|")] if "|" in text else None
        if cells is None or function is None:
            columns = None
            continue
        lowered = [c.lower() for c in cells]
        given_at = _column(lowered, _INPUT_COLUMNS)
        header = (given_at, _column(lowered, _OUTPUT_COLUMNS, given_at))
        if None not in header:
            columns = header
            continue
        if columns is None or set(text.replace("|", "").strip()) <= set("-: ") or max(columns) >= len(cells):
            continue
        given = cells[columns[0]]
        tree = _parse_expression(given)
        whole = tree is not None and isinstance(tree.body, ast.Call) and _uses_only(tree, set(functions), set())
        call = given if whole else _call_of(function, given, functions[function])
        expected = literal_prefix(cells[columns[1]])
        if call is not None and expected is not None:
            found.append(Check(number, call, expected, VALUE, "table"))
    return found


# --- entry points ---------------------------------------------------------------------------------------------


def checks_in(code: str, first_line: int = 1, only: str | None = None, names_from: str | None = None) -> list[Check]:
    """The checks the examples in `code` state, one per example line, in line order (at most MAX_CHECKS).

    `only` keeps the examples of that one top-level function; `names_from` is the code whose top-level functions
    examples may call (default `code` itself); line numbers start at `first_line`.
    """
    lines = code.splitlines()
    functions = top_level_functions(names_from if names_from is not None else code)
    view = [text_view(line) for line in lines]
    owner = _regions(lines)
    if only is not None:
        owner = [name if name == only else None for name in owner]
        view = [text if name == only else "" for text, name in zip(view, owner)]
    owner = [name if name in functions else None for name in owner]
    prose = [prose_view(text) for text in view]
    try:
        found = (
            _doctests(view, owner, set(functions))
            + _inline(prose, set(functions))
            + _phrases(prose, owner, functions)
            + _input_output(prose, owner, functions)
            + _tables(prose, owner, functions)
        )
    except (RecursionError, MemoryError):  # an expression nested past what ast can walk: read nothing from it
        return []
    unique = {}
    for check in sorted(found, key=lambda c: c.line):
        unique.setdefault((check.setup, check.expression, check.expected), check)
    return [
        Check(c.line + first_line - 1, c.expression, c.expected, c.compare, c.origin, c.setup)
        for c in list(unique.values())[:MAX_CHECKS]
    ]


def checks_for_prompt(prompt: str, language: languages.Language | str | None = None) -> list[Check]:
    """The examples of a prompt (a signature and docstring, or any code before the candidate) in `language`
    (a Language, its name or alias; None: Python)."""
    lang = languages.resolve(language)
    if lang is not languages.PYTHON:
        return braced.checks_in(prompt, lang.name, lang.line_comments, lang.block_comment)
    return checks_in(prompt)


def checks_for_infill(prefix: str, suffix: str, language: languages.Language | str | None = None) -> list[Check]:
    """The examples of the top-level function the cursor is in (between `prefix` and `suffix`)."""
    lang = languages.resolve(language)
    if lang is not languages.PYTHON:
        enclosing = braced.enclosing_function(prefix, lang.name)
        if enclosing is None:
            return []
        return braced.checks_in(prefix + suffix, lang.name, lang.line_comments, lang.block_comment, only=enclosing)
    enclosing = [m.group(1) for m in _DEF.finditer(prefix)]
    if not enclosing:
        return []
    around = prefix + suffix
    return checks_in(around, only=enclosing[-1], names_from=around)


def checks_for_words(text: str, language: languages.Language | str | None = None) -> list[Check]:
    """The assert statements a request in words carries ("it must satisfy assert f(2) == 4."), each from its
    `assert` to the end of its line, as the user's checks in `language`; one that does not read as a check is left
    out (a request is prose: nothing in it is an error)."""
    found = []
    for line in text.split("\n"):
        for start in [m.start() for m in re.finditer(r"\bassert\b", line)]:
            statement = line[start:].strip()
            for candidate in (statement.rstrip("."), statement):  # a sentence's full stop, before a float's
                try:
                    found += parse_user_checks(candidate, language)
                    break
                except ValueError:
                    continue
            else:
                continue
            break  # one check per line: the first assert that reads as one
    return found


def parse_user_checks(text: str, language: languages.Language | str | None = None) -> list[Check]:
    """The user's own checks, one per line, in `language` (None: Python): in Python `assert f(x) == y` (or
    `f(x) == y`), `assert cond`; in JavaScript `assert.deepStrictEqual(f(x), y)`, `assert(f(x) === y)`,
    `console.assert(...)`; in C and C++ `assert(f(x) == y);`; in Rust `assert_eq!(f(x), y);`, `assert!(...)`; in Java
    `assert f(x) == y;` or `assert f(x).equals(y);`. Blank lines and comments skipped. ValueError names the first
    line that is not one (or a language whose asserts are not read)."""
    lang = languages.resolve(language)
    if not text.strip():
        return []  # none given: nothing to read, in any language
    if lang is not languages.PYTHON and not braced.reads_asserts(lang.name):
        raise ValueError(
            f"checks written in {lang.display} are not read: write them in Python or in one of "
            f"{', '.join(sorted(braced.ASSERTS))}"
        )
    if len(text) > MAX_USER_CHECK_CHARS:
        raise ValueError(f"checks are {len(text)} characters: they must be at most {MAX_USER_CHECK_CHARS}")
    comments = lang.line_comments or ("#",)
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        source = line.strip()
        if not source or source.startswith(comments):
            continue
        found.append(
            _user_check(number, source) if lang is languages.PYTHON else braced.user_check(number, source, lang.name)
        )
    if len(found) > MAX_CHECKS:
        raise ValueError(f"{len(found)} checks given: at most {MAX_CHECKS} are run")
    return found


def _user_check(number: int, source: str) -> Check:
    refused = ValueError(
        f"check line {number} ({source[:80]!r}) is not an assert statement or an expression: "
        "write one check per line, e.g. assert add(2, 3) == 5"
    )
    try:
        if re.match(r"assert\b", source):
            statement = ast.parse(source).body
            if len(statement) != 1 or not isinstance(statement[0], ast.Assert):
                raise refused
            test = statement[0].test  # the message after a comma is not part of the check
        else:
            tree = _parse_expression(source)
            if tree is None:
                raise refused
            test = tree.body
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            return Check(number, ast.unparse(test.left), ast.unparse(test.comparators[0]), VALUE, "assert")
        return Check(number, ast.unparse(test), "", TRUTHY, "assert")
    except PARSE_ERRORS:
        raise refused from None
