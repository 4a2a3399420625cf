"""Where the block a prompt opened ends in a braced language (JavaScript, Java, C, Go, Rust, ...): a small scanner of
braces outside strings and comments (no parser, no model). A completion leaves the block at the `}` that closes the
innermost block still open at the prompt's end, so a function stops after its body, before anything that follows."""

from __future__ import annotations

import re
from dataclasses import dataclass

from languages import Language

_CHAR_QUOTED = ("c", "cpp", "csharp", "java", "go", "rust")  # `'` opens a character literal, not a string ('a', '\n')
_CHAR = re.compile(r"'(?:\\.[^'\n]{0,8}|[^\\'\n])'")  # a whole character literal; a Rust lifetime ('a) is not one


@dataclass(frozen=True)
class ScanState:
    """Where a scan stands: how deep in braces, and inside which string or comment (its closing mark) if any."""

    depth: int = 0
    inside: str | None = None  # the mark that ends the string or comment the scan is in: '"', "\n", "*/", ...


@dataclass(frozen=True)
class BraceEnd:
    """The end of the innermost block open at the prompt's end."""

    start: ScanState  # the scan's state at the prompt's end
    language: Language

    @staticmethod
    def of(prompt: str, language: Language) -> BraceEnd | None:
        """The rule for a prompt that ends inside a block; None when no block is open there."""
        state, _ = scan(prompt, ScanState(), language)
        return BraceEnd(state, language) if state.depth > 0 else None

    def ends_at(self, text: str) -> int | None:
        """Index just after the `}` that closes the prompt's innermost open block, or None while it is open."""
        _, closed_at = scan(text, self.start, self.language, stop_below=self.start.depth)
        return closed_at


def scan(
    text: str, state: ScanState, language: Language, stop_below: int | None = None
) -> tuple[ScanState, int | None]:
    """Scan `text` from `state`: (the state at its end, or where the depth first fell below `stop_below`, just
    after that brace)."""
    openers = _openers(language)
    depth, inside, at = state.depth, state.inside, 0
    while at < len(text):
        if inside is not None:
            at, inside = _leave(text, at, inside)
            continue
        if (char := _CHAR.match(text, at)) is not None and language.name in _CHAR_QUOTED:
            at = char.end()
            continue
        mark = next((m for m in openers if text.startswith(m, at)), None)
        if mark is not None:
            inside, at = openers[mark], at + len(mark)
            continue
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        at += 1
        if stop_below is not None and depth < stop_below:
            return ScanState(depth, None), at
    return ScanState(depth, inside), None


def _openers(language: Language) -> dict[str, str]:
    """Each mark that opens a string or comment in the language -> the mark that closes it."""
    marks = {mark: "\n" for mark in language.line_comments}
    if language.block_comment is not None:
        marks[language.block_comment[0]] = language.block_comment[1]
    quotes = ['"', "`"] + ([] if language.name in _CHAR_QUOTED else ["'"])
    marks.update({quote: quote for quote in quotes})
    return dict(sorted(marks.items(), key=lambda item: -len(item[0])))  # longest first: `/*` before `/`


def _leave(text: str, at: int, closing: str) -> tuple[int, str | None]:
    """Advance inside a string or comment: (where the scan goes on, the closing mark still awaited or None)."""
    if closing not in ("\n", "*/", "-->") and text[at] == "\\":  # an escape inside a string
        return at + 2, closing
    if text.startswith(closing, at):
        return at + len(closing), None
    return at + 1, closing
