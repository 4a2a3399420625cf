"""Open blocks of a piece of code, found lexically (comments and strings skipped): what still has to close them.

A prompt that ends inside a function body (`function f(a) {`) is judged with its open blocks closed (`}` appended),
the way the Python path gives an open `def` the body `pass`. The closers come from languages.open_blocks (the
language's lexis and block words); the result is a guess that the parser then confirms: whatever the scanner gets
wrong (a regular expression literal, a heredoc) only means the closed text still does not parse, and then the code is
judged as written.
"""

from __future__ import annotations

from languages import open_blocks

__all__ = ["closing_text", "open_blocks"]


def closing_text(closers: list[str]) -> str:
    """What to append to close the blocks (innermost first), each closer on its own line."""
    return "".join(f"\n{closer}" for closer in reversed(closers)) + "\n" if closers else ""
