"""Open blocks of a piece of code, found lexically (comments and strings skipped): what still has to close them.

A prompt that ends inside a function body (`function f(a) {`) is judged with its open blocks closed (`}` appended),
the way the Python path gives an open `def` the body `pass`. The result is a guess that the parser then confirms:
whatever this scanner gets wrong (a regular expression literal, a heredoc) only means the closed text still does not
parse, and then the code is judged as written.
"""

from __future__ import annotations

import re
from functools import cache

from languages import KEYWORDS, Language

_PAIRS = {"{": "}", "(": ")", "[": "]"}
_BACKTICK_STRINGS = ("javascript", "typescript", "tsx", "go", "shell")  # template literals, raw strings, `cmd`
_LOOPS = ("while", "until", "for")  # Ruby: their optional `do` opens no second block
_STATEMENT_BEFORE = ";=(|&{!"  # a block word right after one of these starts a statement (`x = if ...`, `a; if`)
_WORDS_BEFORE = ("then", "else", "do", "elif", "begin")  # ... or right after one of these words


def open_blocks(code: str, language: Language) -> list[str]:
    """The closers the code still owes, outermost first: ["}", "}"] for a Java method left open in its class."""
    pattern, words = _scanner(language)
    stack: list[str] = []
    for token in pattern.finditer(code):
        text = token.group()
        if token.lastgroup == "bracket":
            if text in _PAIRS:
                stack.append(_PAIRS[text])
            elif stack and stack[-1] == text:
                stack.pop()
        elif token.lastgroup == "word":
            _block_word(code, token.start(), text, words, stack)
    return stack


def closing_text(closers: list[str]) -> str:
    """What to append to close the blocks (innermost first), each closer on its own line."""
    return "".join(f"\n{closer}" for closer in reversed(closers)) + "\n" if closers else ""


def _block_word(code: str, start: int, word: str, words: dict[str, str], stack: list[str]) -> None:
    """Opening words count where a statement starts (`x = 1 if y` opens nothing); in Ruby (blocks closed by `end`)
    `do` opens and `end` closes wherever they stand (`xs.each do |x|`, `if a then b else c end`)."""
    line_start = code.rfind("\n", 0, start) + 1
    before = code[line_start:start].rstrip()
    at_statement = not before or before[-1] in _STATEMENT_BEFORE or before.endswith(_WORDS_BEFORE)
    end_style = words.get("do") == "end"
    if word in words:
        if at_statement or (word == "do" and end_style and not before.lstrip().startswith(_LOOPS)):
            stack.append(words[word])
    elif (at_statement or end_style) and stack and stack[-1] == word:
        stack.pop()


@cache
def _scanner(language: Language) -> tuple[re.Pattern, dict[str, str]]:
    """One regular expression that finds, left to right, the comments, strings, brackets and block words."""
    skipped = []
    if language.block_comment is not None:
        opening, closing = (re.escape(mark) for mark in language.block_comment)
        at_line = "^" if language.block_comment[0].startswith("=") else ""  # Ruby's =begin/=end start a line
        skipped.append(rf"{at_line}{opening}.*?(?:{at_line}{closing}|\Z)")
    for mark in language.line_comments:
        if mark == "#" and language.name == "shell":
            skipped.append(r"(?<![^\s;&|(])#[^\n]*")  # only at a word's start: `$#` and `${#x}` are no comments
        elif mark == "#" and language.name == "php":
            skipped.append(r"#(?!\[)[^\n]*")  # `#[` opens an attribute
        else:
            skipped.append(rf"{re.escape(mark)}[^\n]*")
    skipped.append(r'"(?:\\.|[^"\\])*"?')
    if language.name == "rust":
        skipped.append(r"'(?:\\[^']{1,10}|[^\\'\n])'")  # a char literal; any other `'` is a lifetime
    elif language.name == "shell":
        skipped.append(r"'[^']*'?")
    else:
        skipped.append(r"'(?:\\.|[^'\\\n])*'?")
    if language.name in _BACKTICK_STRINGS:
        skipped.append(r"`(?:\\.|[^`\\])*`?")
    words = dict(language.block_words) if language.blocks == KEYWORDS else {}
    parts = [f"(?:{'|'.join(skipped)})", r"(?P<bracket>[{}()\[\]])"]
    if words:
        every = sorted(set(words) | set(words.values()), key=len, reverse=True)
        parts.append(rf"(?<![\w$.:@])(?P<word>{'|'.join(every)})(?![\w?!:])")
    return re.compile("|".join(parts), re.DOTALL | re.MULTILINE), words
