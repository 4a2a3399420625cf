"""Where the function a prompt opened ends: a small scanner of Python's logical lines (no parser, no model).

A completion leaves the body of the `def` it is completing at the first logical line indented at or below
that `def`'s own indentation (so a method stops before the next method, a top-level function before any new
top-level statement, an `import` or a `# comment` included). Logical lines are found with Python's own
rules: a newline inside brackets, a string or after a backslash continuation does not start one, so a
multi-line string or call written at column 0 does not end the body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CODE_EVENT = re.compile(r"[\n#'\"\\()\[\]{}]")
_STRING_END = {
    quote: re.compile(r"\\(?:\r\n|.)|" + re.escape(quote) + ("" if len(quote) == 3 else r"|\n"), re.DOTALL)
    for quote in ("'", '"', "'''", '"""')
}
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
class ScanState:
    """Where a scan stopped, so a longer text with the same beginning can be scanned from there."""

    position: int = 0  # next index to read
    quote: str = ""  # delimiter of the string the position is inside, "" in code
    depth: int = 0  # open brackets
    pending_line: int | None = 0  # index of a logical line whose first non-blank character is still unread


def scan_lines(text: str, state: ScanState = ScanState()) -> tuple[list[LineStart], ScanState]:
    """The logical-line starts of text[state.position:] (whose first non-blank character is in the text), and
    the state to resume from when the text grows."""
    starts: list[LineStart] = []
    position, quote, depth, pending = state.position, state.quote, state.depth, state.pending_line
    while True:
        if pending is not None:
            found = _line_start(text, pending)
            if found is None:  # only blanks so far: the line's content is still to come
                return starts, ScanState(len(text), quote, depth, pending)
            if isinstance(found, LineStart):
                starts.append(found)
            position, pending = max(position, _INDENT.match(text, pending).end()), None  # past the indentation
        if quote:
            end = _STRING_END[quote].search(text, position)
            while end is not None and end.group().startswith("\\"):
                end = _STRING_END[quote].search(text, end.end())
            if end is None:  # still inside the string: resume from here (an escape may be half read)
                return starts, ScanState(position, quote, depth, None)
            position, quote = end.end(), ""
            if end.group() == "\n":  # an unterminated one-line string ends with its line
                position -= 1
            continue
        event = _CODE_EVENT.search(text, position)
        if event is None:
            return starts, ScanState(len(text), "", depth, None)
        char, position = event.group(), event.end()
        if char in "'\"\\" and event.start() + 3 > len(text):  # `""` may become `"""`, `\` escapes what follows
            return starts, ScanState(event.start(), "", depth, None)
        if char == "#":
            newline = text.find("\n", position)
            if newline < 0:  # the comment may go on: resume from its start
                return starts, ScanState(event.start(), "", depth, None)
            position = newline
        elif char in "'\"":
            quote = char * 3 if text.startswith(char * 3, event.start()) else char
            position = event.start() + len(quote)
        elif char == "\\":  # an escaped newline (\n or \r\n) continues the logical line
            position += 2 if text.startswith("\r\n", position) else 1
        elif char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth = max(depth - 1, 0)
        elif depth == 0:  # a newline outside brackets: a logical line may start next
            pending = position


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
    """The end-of-body rule for one prompt: its enclosing `def`'s indentation and the scan state after it."""

    prompt: str
    def_indent: int | None  # None: the prompt is not inside a function, and nothing ends a body
    after_prompt: ScanState
    body_done: bool = False  # the function already has code (not only a docstring) and the prompt ends a line

    @staticmethod
    def of(prompt: str) -> BodyEnd:
        starts, state = scan_lines(prompt)
        found = _enclosing_def(prompt, starts)
        if found is None:
            return BodyEnd(prompt, None, state)
        index, indent = found
        has_code = any(not s.is_comment and not _STRING_START.match(prompt, s.offset) for s in starts[index + 1 :])
        return BodyEnd(prompt, indent, state, has_code and state.pending_line is not None)

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
        starts, _ = scan_lines(text, self.after_prompt)
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
