"""Where the function a prompt opened ends: Python's logical lines (no parser, no model).

A completion leaves the body of the `def` it is completing at the first logical line indented at or below
that `def`'s own indentation (so a method stops before the next method, a top-level function before any new
top-level statement, an `import` or a `# comment` included). Logical lines are found with Python's own
rules: a newline inside brackets, a string or after a backslash continuation does not start one, so a
multi-line string or call written at column 0 does not end the body. Strings and comments are found by
languages.pieces, the one scanner of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import languages

_LEXIS = languages.by_name("python").lexis
_LINE_EVENT = re.compile(r"[\n\\()\[\]{}]")  # outside strings and comments: what ends or continues a logical line
_INDENT = re.compile(r"[ \t\f]*")
_DEF = re.compile(r"(?:async[ \t]+)?def[ \t]")
_STRING_START = re.compile(r"[rRuUbBfF]{0,2}['\"]")  # a line that is a string: a docstring, not code
_OPENERS, _CLOSERS = "([{", ")]}"


@dataclass(frozen=True)
class LineStart:
    """The first character of a logical line: where it is, how far it is indented, what it begins with."""

    offset: int  # index of the line's first non-blank character in the scanned text
    line_offset: int  # index of the line's first character (its indentation begins here)
    indent: int  # columns of indentation (a tab counts to the next multiple of 8, as Python does)
    is_comment: bool  # the line holds only a comment


@dataclass(frozen=True)
class Resume:
    """Where a scan begins: a position outside strings and comments (or, with `inside`, on a line inside the string
    that mark opened), the brackets open there, and whether a logical line starts there."""

    position: int = 0
    depth: int = 0
    line_start: bool = True
    inside: str = ""  # the opening mark of the string the position is inside, "" in code


def scan_lines(text: str, resume: Resume = Resume()) -> tuple[list[LineStart], int | None]:
    """The logical-line starts of text[resume.position:], and the index of a logical line whose first non-blank
    character is not in the text yet (None: the text ends inside a line)."""
    starts, pending, _ = _scan(text, resume)
    return starts, pending


def _scan(text: str, resume: Resume) -> tuple[list[LineStart], int | None, Resume]:
    """scan_lines, and where a longer text with the same beginning is scanned from: the pending line's start; else
    the last place whose reading what follows cannot change."""
    breaks, tail = _line_breaks(text, resume)
    starts: list[LineStart] = []
    pending = None
    for line_offset in [resume.position, *breaks] if resume.line_start else breaks:
        found = _line_start(text, line_offset)
        if isinstance(found, LineStart):
            starts.append(found)
        pending = line_offset if found is None else None
    return starts, pending, Resume(pending, 0, True) if pending is not None else tail


def _line_breaks(text: str, resume: Resume) -> tuple[list[int], Resume]:
    """(the index after each newline of text[resume.position:] that ends a logical line: outside brackets, strings
    and comments, and not escaped by a backslash; the place before a string, comment or backslash that reaches the
    text's end, or the last line of a string that goes on over lines, else the end: with the brackets open there)."""
    depth, breaks = resume.depth, []
    for kind, start, end, inside in _tokens(text, resume.position, resume.inside):
        if kind in ("piece", "\\") and end >= len(text):  # the last token: what follows may go on with it
            line = text.rfind("\n", start, end) + 1
            if inside and line > start:  # a string that goes on over lines: from its last line
                return breaks, Resume(line, depth, False, inside)
            return breaks, Resume(start, depth, False)
        if kind in _OPENERS:
            depth += 1
        elif kind in _CLOSERS:
            depth = max(depth - 1, 0)
        elif kind == "\n" and depth == 0:
            breaks.append(end)
    return breaks, Resume(len(text), depth, False)


def _tokens(text: str, begin: int, inside: str = "") -> Iterator[tuple[str, int, int, str]]:
    """(kind, start, end, mark) in order for text[begin:] (which goes on inside a string opened by `inside`, if
    given): "piece" for each string or comment (languages.pieces, the one scanner of them; `mark` its opening mark
    where the text ends inside it, else ""), else each newline, bracket or backslash outside them. A backslash
    outside strings escapes the character after it (a line's end included; its end is that character's), the first
    character of a string or comment too: the reading starts again after it."""
    position, lead = begin, inside
    while position is not None:
        position = yield from _tokens_until_escape(text, position, lead)
        lead = ""


def _tokens_until_escape(text: str, begin: int, lead: str):
    """_tokens from `begin`, up to a backslash that escapes a string's or comment's first character; then where to
    read on from (None: the text's end)."""
    cursor = escaped_to = begin
    shift = begin - len(lead)  # an index in lead + text[begin:] -> one in text
    for piece in (*languages.pieces(lead + text[begin:], _LEXIS), None):
        stop = len(text) if piece is None else max(shift + piece.start, begin)
        for event in _LINE_EVENT.finditer(text, cursor, stop):
            if event.start() < escaped_to:
                continue
            if event.group() == "\\":
                escaped_to = event.end() + (2 if text.startswith("\r\n", event.end()) else 1)
                yield "\\", event.start(), escaped_to, ""
                if piece is not None and escaped_to > stop:
                    return escaped_to
            else:
                yield event.group(), event.start(), event.end(), ""
        if piece is None:
            return None
        yield "piece", stop, shift + piece.end, piece.mark if piece.goes_on else ""
        cursor = shift + piece.end
    return None


def _line_start(text: str, line_offset: int) -> LineStart | str | None:
    """The LineStart of the line beginning at line_offset; "blank" for an empty line; None while only blanks
    have been read."""
    blanks = _INDENT.match(text, line_offset).group()
    offset = line_offset + len(blanks)
    if offset >= len(text):
        return None
    if text[offset] in "\r\n":
        return "blank"
    indent = len(blanks.replace("\f", "").expandtabs(8))
    return LineStart(offset, line_offset, indent, text[offset] == "#")


@dataclass(frozen=True)
class BodyEnd:
    """The end-of-body rule for one prompt: its enclosing `def`'s indentation and where its completions are scanned
    from."""

    prompt: str
    def_indent: int | None  # None: the prompt is not inside a function, and nothing ends a body
    resume: Resume  # where prompt + completion is scanned from (at or before the prompt's end)
    body_done: bool = False  # the function already has code (not only a docstring) and the prompt ends a line

    @staticmethod
    def of(prompt: str) -> BodyEnd:
        starts, pending, resume = _scan(prompt, Resume())
        found = _enclosing_def(prompt, starts)
        if found is None:
            return BodyEnd(prompt, None, resume)
        index, indent = found
        has_code = any(not s.is_comment and not _STRING_START.match(prompt, s.offset) for s in starts[index + 1 :])
        return BodyEnd(prompt, indent, resume, has_code and pending is not None)

    def ends_at(self, completion: str) -> int | None:
        """Index in completion where the text ends because the logical line that begins there leaves the body
        (the body's own newlines, blank lines included, stay: they are the tokens' text); None while the
        completion is still inside the body.

        When the prompt ends after a function that already has code and the completion's first line is outside
        it (the model starts the next function), the rule follows the function that line opens; a first line
        that opens none leaves nothing to end. A function with only a docstring is still the one to complete:
        a first line outside it ends the candidate at once (an empty implementation)."""
        if self.def_indent is None:
            return None
        text = self.prompt + completion
        starts, _ = scan_lines(text, self.resume)
        def_indent, first = self.def_indent, self.body_done
        for start in starts:
            if start.offset < len(self.prompt):
                continue
            if start.indent <= def_indent:
                if not first:
                    return max(start.line_offset - len(self.prompt), 0)
                if not _DEF.match(text, start.offset):
                    return None
                def_indent = start.indent
            first = False
        return None


def _enclosing_def(prompt: str, starts: list[LineStart]) -> tuple[int, int] | None:
    """(index in starts, indentation) of the innermost `def` whose body the end of the prompt is still in."""
    lowest_after = None  # the lowest indentation of the code lines after the def being looked at
    for index in range(len(starts) - 1, -1, -1):
        start = starts[index]
        if _DEF.match(prompt, start.offset) and (lowest_after is None or lowest_after > start.indent):
            return index, start.indent
        if not start.is_comment:
            lowest_after = start.indent if lowest_after is None else min(lowest_after, start.indent)
    return None
