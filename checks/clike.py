"""A little lexing of C-like code (JavaScript, C++, Java, Rust...): where strings, characters and comments are, and
where brackets close. Enough to cut an assert line into its parts and to count a program's open braces; not a
parser.
"""

from __future__ import annotations

import re

import languages

OPENING, CLOSING = "([{", ")]}"


def mask(text: str, comments: bool = True) -> str:
    """`text` with the inside of every string and character literal replaced by `_` and (when `comments`) every
    `//` and `/* */` comment by blanks; the same length, newlines kept, so offsets carry over (languages.mask with the
    C family's lexis where the language is not known: `'` a character, or else a string that closes on its line)."""
    return languages.mask(text, languages.C_LIKE, comments)


def balanced(text: str) -> bool:
    """Every bracket of `text` (outside strings and comments) closes, in order."""
    stack = []
    for char in mask(text):
        if char in OPENING:
            stack.append(CLOSING[OPENING.index(char)])
        elif char in CLOSING:
            if not stack or stack.pop() != char:
                return False
    return not stack


def closing(text: str, open_at: int) -> int | None:
    """Index just past the bracket that closes the one at `open_at`, or None."""
    masked, depth = mask(text), 0
    for index in range(open_at, len(masked)):
        if masked[index] in OPENING:
            depth += 1
        elif masked[index] in CLOSING:
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def top_level(text: str, pattern: str) -> list[re.Match]:
    """Matches of `pattern` in `text` outside strings, comments and brackets."""
    masked = mask(text)
    depth_at, depth = [], 0
    for char in masked:
        if char in CLOSING:
            depth -= 1
        depth_at.append(depth)
        if char in OPENING:
            depth += 1
    return [m for m in re.finditer(pattern, masked) if depth_at[m.start()] == 0]


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """`text` cut at each `separator` outside strings, comments and brackets, parts stripped."""
    parts, start = [], 0
    for match in top_level(text, re.escape(separator)):
        parts.append(text[start : match.start()].strip())
        start = match.end()
    return parts + [text[start:].strip()]


def open_braces(text: str) -> int:
    """How many `{` of `text` are still open at its end (outside strings and comments)."""
    masked = mask(text)
    return max(0, masked.count("{") - masked.count("}"))
