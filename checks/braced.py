"""Checks as data in the languages other than Python (JavaScript, TypeScript, C++, Java, Rust, ...): the examples a
prompt's comments state, and the assert lines a user gives. Conservative, as extract.py is: an example is read only
when it calls one of the code's own functions and its expected value reads as a value; nothing is guessed.

Forms read in comments (`//`, `///`, `//!`, `/* */` with or without ` * ` margins, `#` where the language has it):
- MultiPL-E's translated doctests: `>>> f(x)` and the comment line below it, the expected value written in the
  language itself (`// >>> strlen(("abc"))` then `// (3)`; Rust's `/// >>> strlen(String::from("abc"))`, `/// 3`);
- inline: `f(x) == y`, `f(x) === y`, `f(x) -> y`, `f(x) => y`, `f(x) ➞ y`, `f(x) → y`, `f(x) returns y`,
  `f(x) // y` ..., where the arguments and `y` are plain literals (numbers, strings, true/false/null, arrays and
  objects of them): prose around a call is not code of the language, so nothing richer is read there.
"""

from __future__ import annotations

import re

from checks import clike
from checks.check import MAX_CHECKS, TRUTHY, VALUE, Check

# --- the functions a language's code defines ----------------------------------------------------------------------

_C_DEFINITION = (
    r"^[ \t]*(?:@\w+(?:\([^)]*\))?[ \t]+)*"  # Java annotations
    r"(?!(?:return|if|else|for|while|switch|do|case|new|throw|delete|using|typedef|goto|catch|sizeof)\b)"
    r"(?:[A-Za-z_][\w:<>,\[\]*&.?]*[ \t]+)+[*&]*[ \t]*([A-Za-z_]\w*)[ \t]*\([^;]*$"  # a type, a name, a `(`, no `;`
)
_JS_DEFINITION = (
    r"^[ \t]*(?:export[ \t]+(?:default[ \t]+)?)?(?:async[ \t]+)?function[ \t]*\*?[ \t]*([A-Za-z_$][\w$]*)[ \t]*[(<]"
    r"|^[ \t]*(?:export[ \t]+)?(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*(?::[^=]+)?=[ \t]*(?:async[ \t]+)?"
    r"(?:function\b|\([^)]*\)[ \t]*(?::[^=]+)?=>|[A-Za-z_$][\w$]*[ \t]*=>)"
)
DEFINITIONS = {
    "javascript": _JS_DEFINITION,
    "typescript": _JS_DEFINITION,
    "tsx": _JS_DEFINITION,
    "rust": r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?(?:(?:const|async|unsafe|extern[ \t]+\"[^\"]*\")[ \t]+)*fn[ \t]+(\w+)",
    "go": r"^func[ \t]+(?:\([^)]*\)[ \t]*)?([A-Za-z_]\w*)",
    "php": r"^[ \t]*(?:(?:public|private|protected|static|final|abstract)[ \t]+)*function[ \t]+&?[ \t]*(\w+)",
    "ruby": r"^[ \t]*def[ \t]+(?:self\.)?([A-Za-z_]\w*[?!]?)",
    "shell": r"^[ \t]*(?:function[ \t]+)?([A-Za-z_][\w-]*)[ \t]*\(\)",
}  # c, cpp, java, csharp: _C_DEFINITION


def definitions(code: str, language: str) -> dict[int, str]:
    """The functions `code` defines: {0-based line: name}."""
    pattern = re.compile(DEFINITIONS.get(language, _C_DEFINITION))
    found = {}
    for number, line in enumerate(clike.mask(code).splitlines()):
        match = pattern.match(line)
        if match:
            found[number] = next(name for name in match.groups() if name)
    return found


# --- the lines examples are written in ------------------------------------------------------------------------


def comment_texts(lines: list[str], line_comments: tuple[str, ...], block: tuple[str, str] | None) -> list[str]:
    """For each line, the text of the comment it is ("" for a line of code): marks and ` * ` margins removed."""
    texts, in_block = [], False
    for line in lines:
        stripped = line.strip()
        if in_block or (block and stripped.startswith(block[0])):
            body = stripped if in_block else stripped[len(block[0]) :]
            end = body.find(block[1])
            in_block = end < 0
            texts.append((body if end < 0 else body[:end]).lstrip("*!").strip())
            continue
        mark = next((m for m in line_comments if stripped.startswith(m)), None)
        texts.append("" if mark is None else stripped[len(mark) :].lstrip(mark[-1]).lstrip("!").strip())
    return texts


def _owners(lines: list[str], texts: list[str], defined: dict[int, str]) -> list[str | None]:
    """For each line, the function it documents: the one defined right after its run of comments (blank lines and
    annotations between), else the one whose definition came last above it."""
    ahead: list[str | None] = [None] * len(lines)
    upcoming = None
    for index in range(len(lines) - 1, -1, -1):
        if index in defined:
            upcoming = defined[index]
        elif not (texts[index] or not lines[index].strip() or lines[index].strip().startswith(("@", "#["))):
            upcoming = None
        ahead[index] = upcoming
    owners, current = [], None
    for index in range(len(lines)):
        current = defined.get(index, current)
        owners.append(ahead[index] or current)
    return owners


# --- what reads as a value -----------------------------------------------------------------------------------------

_NUMBER = r"0[xXbBoO]\w+|(?:\d[\d_]*(?:\.\d[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?(?:[A-Za-z_]\w*)?"  # 3l 1.5f 1e-9
_TOKEN = re.compile(rf"\s*(?:(?P<string>[\"'`]_*[\"'`])|(?P<number>{_NUMBER})|(?P<word>[A-Za-z_$][\w$]*)|(?P<op>\S))")
_BEFORE_A_WORD = frozenset(
    "new typeof void const unsigned signed long short struct mut as await ref move dyn impl int char".split()
)


def _tokens(text: str) -> list[tuple[str, str]] | None:
    """(kind, text) of each token of `text` (strings masked), or None where a string does not close."""
    masked, found, index = clike.mask(text, comments=False), [], 0
    while index < len(masked):
        match = _TOKEN.match(masked, index)
        if match is None:
            break
        found.append((match.lastgroup, match.group(match.lastgroup)))
        index = match.end()
    if any(kind == "op" and token in "\"'`" for kind, token in found):
        return None
    return found


def reads_as_value(text: str) -> bool:
    """`text` could be one expression of a C-like language: brackets balance, no `;` inside it, and no two words
    side by side (as a sentence has them), beyond the pairs code has (`new Foo`, `unsigned long`, `x as i64`)."""
    text = text.strip().rstrip(";").strip()
    tokens = _tokens(text)
    if not text or tokens is None or not clike.balanced(text) or clike.top_level(text, ";"):
        return False
    for (kind, token), (next_kind, next_token) in zip(tokens, tokens[1:]):
        if kind != "op" and next_kind != "op" and token not in _BEFORE_A_WORD and next_token != "as":
            return False
    return True


_LITERAL_WORDS = frozenset("true false null undefined None nil NaN Infinity".split())


def _literal(tokens: list[tuple[str, str]], at: int) -> int | None:
    """Index past the plain literal that starts at `at` (a number, string, true/false/null, an array or object of
    literals, a literal in parentheses, a negative number), or None."""
    if at >= len(tokens):
        return None
    kind, token = tokens[at]
    if kind in ("string", "number") or (kind == "word" and token in _LITERAL_WORDS):
        return at + 1
    if token == "-":
        return _literal(tokens, at + 1)
    if token in ("[", "(", "{"):
        closer = clike.CLOSING[clike.OPENING.index(token)]
        index = at + 1
        while index < len(tokens) and tokens[index][1] != closer:
            if token == "{" and index + 1 < len(tokens) and tokens[index + 1][1] == ":":
                index += 2  # an object's key
            index = _literal(tokens, index)
            if index is None:
                return None
            if index < len(tokens) and tokens[index][1] == ",":
                index += 1
        return index + 1 if index < len(tokens) else None
    return None


def literal_prefix(text: str) -> str | None:
    """The longest start of `text` that is one plain literal ("[1, 2] and more" gives "[1, 2]"), or None."""
    tokens = _tokens(text)
    if not tokens:
        return None
    try:
        end = _literal(tokens, 0)
    except RecursionError:  # nested past what the reader walks: not read
        return None
    if end is None:
        return None
    masked, index = clike.mask(text, comments=False), 0
    for _ in range(end):
        index = _TOKEN.match(masked, index).end()
    return text[:index].strip()


def plain_call(call: str, name: str) -> bool:
    """`call` is `name(a, b)` whose arguments are plain literals (a trailing comma allowed)."""
    inner = call[len(name) :].strip()[1:-1]
    if not inner.strip():
        return True
    return all(literal_prefix(part) == part for part in clike.split_top_level(inner) if part)


# --- the forms ------------------------------------------------------------------------------------------------


def calls(expression: str, functions: set[str]) -> bool:
    """Whether `expression` calls one of `functions` (outside its strings)."""
    masked = clike.mask(expression, comments=False)
    return any(re.search(r"(?<![\w$.])" + re.escape(name) + r"\s*\(", masked) for name in functions)


MAX_LINE_CHARS = 1000  # an example fits on a line of this; longer comment lines are not read (each costs its length)


def _doctests(texts: list[str], functions: set[str], language: str) -> list[Check]:
    found = []
    for index, text in enumerate(texts):
        if not text.startswith(">>>") or len(text) > MAX_LINE_CHARS:
            continue
        expression = text[3:].strip()
        ahead = index + 1
        expected = texts[ahead] if ahead < len(texts) else ""
        while expected and not clike.balanced(expected) and ahead + 1 < len(texts) and texts[ahead + 1]:
            ahead += 1
            expected += " " + texts[ahead]
        expected = expected.strip().rstrip(";").strip()
        if expected.startswith(">>>") or not (reads_as_value(expression) and reads_as_value(expected)):
            continue
        if calls(expression, functions):
            found.append(Check(index + 1, expression.rstrip(";").strip(), expected, VALUE, "doctest", (), language))
    return found


_SEPARATOR = re.compile(
    r"^\s*(?://\s*|#\s*)?(?:(===|==>|==|➞|⟶|→|=>|->|-->|should\s+(?:return|give|be|equal)|returns?|gives|yields|"
    r"evaluates\s+to|outputs?|is(?:\s+equal\s+to)?|equals|=|:)\s*)?",
    re.IGNORECASE,
)


def _inline(texts: list[str], functions: set[str], language: str) -> list[Check]:
    if not functions:
        return []
    call_start = re.compile(r"(?<![\w$.])(" + "|".join(map(re.escape, sorted(functions))) + r")\s*\(")
    found = []
    for number, text in enumerate(texts, start=1):
        if text.startswith(">>>") or len(text) > MAX_LINE_CHARS:
            continue
        for match in call_start.finditer(text):
            if re.search(r"\b(?:fn|function|def|func)\s*$", text[: match.start()]):
                continue  # a signature in prose, not a call
            end = clike.closing(text, match.end() - 1)
            separator = _SEPARATOR.match(text[end:]) if end is not None else None
            if separator is None or not separator.group(0).strip():
                continue  # `f(x)` alone says nothing about its value
            call = text[match.start() : end].strip()
            expected = literal_prefix(text[end + separator.end() :])
            if expected is not None and plain_call(call, match.group(1)):
                found.append(Check(number, call, expected, VALUE, "inline", (), language))
    return found


def checks_in(
    code: str, language: str, line_comments: tuple[str, ...], block: tuple[str, str] | None, only: str | None = None
) -> list[Check]:
    """The checks the examples in `code`'s comments state, one per example line, in line order (at most
    MAX_CHECKS); `only` keeps the examples of that one function."""
    lines = code.splitlines()
    defined = definitions(code, language)
    functions = set(defined.values())
    texts = comment_texts(lines, line_comments, block)
    if only is not None:
        owners = _owners(lines, texts, defined)
        texts = [text if owner == only else "" for text, owner in zip(texts, owners)]
    found = _doctests(texts, functions, language) + _inline(texts, functions, language)
    unique = {}
    for check in sorted(found, key=lambda c: c.line):
        unique.setdefault((check.expression, check.expected), check)
    return list(unique.values())[:MAX_CHECKS]


def enclosing_function(prefix: str, language: str) -> str | None:
    """The function whose definition comes last in `prefix` (where the cursor is), or None."""
    defined = definitions(prefix, language)
    return defined[max(defined)] if defined else None


# --- the user's own assert lines ------------------------------------------------------------------------------

_EQUALS = r"(?<![=!<>])===?(?!=)"  # `==` or `===`, not `!==`, `<=`, `>=`, `=>`
ASSERTS = {
    "javascript": "assert(X), assert.ok(X), console.assert(X), assert.deepStrictEqual(A, B), assert.strictEqual(A, B)",
    "cpp": "assert(X);",
    "c": "assert(X);",
    "rust": "assert_eq!(A, B);, assert!(X);",
    "java": "assert X;, assert(X);",
}
ASSERTS["typescript"] = ASSERTS["tsx"] = ASSERTS["javascript"]
_TWO_ARGUMENTS = {
    "javascript": r"assert\.(?:deepStrictEqual|strictEqual|deepEqual|equal)",
    "rust": r"(?:debug_)?assert_eq!",
}
_ONE_ARGUMENT = {
    "javascript": r"(?:console\.assert|assert\.ok|assert)",
    "cpp": r"assert",
    "c": r"assert",
    "rust": r"(?:debug_)?assert!",
    "java": r"assert",
}
for _name in ("typescript", "tsx"):
    _TWO_ARGUMENTS[_name], _ONE_ARGUMENT[_name] = _TWO_ARGUMENTS["javascript"], _ONE_ARGUMENT["javascript"]


def reads_asserts(language: str) -> bool:
    return language in ASSERTS


def user_check(number: int, source: str, language: str) -> Check:
    """One of the user's check lines in `language` as a Check; ValueError naming the line otherwise."""
    refused = ValueError(
        f"check line {number} ({source[:80]!r}) is not an assert of {language} or an expression: write one check "
        f"per line, as {ASSERTS[language]} (or a bare `f(x) == y`)"
    )
    text = source.strip().rstrip(";").strip()
    inner = _called(text, _TWO_ARGUMENTS.get(language))
    if inner is not None:
        parts = clike.split_top_level(inner)
        if len(parts) < 2 or not all(reads_as_value(p) for p in parts[:2]):
            raise refused
        return Check(number, parts[0], parts[1], VALUE, "assert", (), language)
    inner = _called(text, _ONE_ARGUMENT[language])
    if inner is not None:
        text = clike.split_top_level(inner)[0]  # a message after a comma is not part of the check
    elif language == "java" and re.match(r"assert\s", text):
        text = clike.split_top_level(text[len("assert") :], ":")[0]  # `assert x : "message"`
    if not reads_as_value(text):
        raise refused
    return _comparison(number, text, language)


def _called(text: str, name_pattern: str | None) -> str | None:
    """The argument text of `text` when the whole of it is one call of `name_pattern` (`assert(...)`), else None."""
    if name_pattern is None:
        return None
    match = re.match(name_pattern + r"\s*\(", text)
    if match is None or clike.closing(text, match.end() - 1) != len(text):
        return None
    return text[match.end() : -1]


def _comparison(number: int, text: str, language: str) -> Check:
    """`a == b` (or `a === b`, or Java's `a.equals(b)`) as a VALUE check of a against b; anything else TRUTHY."""
    while text.startswith("(") and clike.closing(text, 0) == len(text):
        text = text[1:-1].strip()  # `(f(1) == 2)`, as Java's `assert (x) : message;` writes it
    equals = clike.top_level(text, _EQUALS)
    if len(equals) == 1:
        left, right = text[: equals[0].start()].strip(), text[equals[0].end() :].strip()
        if left and right:
            return Check(number, left, right, VALUE, "assert", (), language)
    if language == "java":
        dots = clike.top_level(text, r"\.equals\s*\(")
        if dots and clike.closing(text, dots[-1].end() - 1) == len(text):
            left, right = text[: dots[-1].start()].strip(), text[dots[-1].end() : -1].strip()
            if left and right:
                return Check(number, left, right, VALUE, "assert", (), language)
    return Check(number, text, "", TRUTHY, "assert", (), language)
