"""Code-aware tokenization: identifiers, keywords, operators and literals, never comments or whitespace."""

from __future__ import annotations

import io
import re
import tokenize

# Token types that carry no code: layout and comments.
_SKIPPED = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
        tokenize.ENCODING,
    }
)

# The fallback lexer: one alternation, tried in order, so the longest operators come first.
# It gives the same tokens as `tokenize` on well-formed code (checked in the tests).
_STRING = r"""(?:[rRbBuUfF]{0,2})(?:'''[\s\S]*?(?:'''|\Z)|\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'(?:\\.|[^'\\\n])*'?|"(?:\\.|[^"\\\n])*"?)"""
_NUMBER = r"(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?)"
_NAME = r"[^\W\d]\w*"
_OPERATOR = r"(?:\*\*=|//=|>>=|<<=|\.\.\.|->|:=|[-+*/%&|^@=<>!]=|\*\*|//|<<|>>|[-+*/%&|^~@<>=.,:;()\[\]{}])"
_LEXER = re.compile(rf"(?P<comment>#[^\n]*)|(?P<space>\\\n|\s+)|(?P<token>{_STRING}|{_NUMBER}|{_NAME}|{_OPERATOR}|\S)")


def regex_token_spans(text: str, start: int = 0) -> list[tuple[str, int, int]]:
    """Code tokens of `text[start:]` with their character spans, by regular expression; never raises."""
    return [(m.group("token"), m.start(), m.end()) for m in _LEXER.finditer(text, start) if m.group("token")]


def code_token_spans(text: str) -> list[tuple[str, int, int]]:
    """Code tokens of `text` with their character spans, by `tokenize` with a regex fallback.

    Candidates are often cut off (a budget or a length limit), which `tokenize` reports by raising;
    the tokens it produced before the error are kept and the rest of the text is lexed by regex.

    Parameters
    ----------
    text : str
        Source code, possibly incomplete or invalid.

    Returns
    -------
    spans : list of (str, int, int)
        Each code token with its start and end offsets in `text`; comments and whitespace are dropped.
    """
    line_starts = [0] + [match.end() for match in re.finditer("\n", text)]  # as StringIO.readline splits
    spans: list[tuple[str, int, int]] = []
    done = 0  # offset just past the last token taken from `tokenize`
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _SKIPPED or not tok.string.strip():
                continue  # layout, comments, or stray whitespace the tokenizer could not place
            start = line_starts[tok.start[0] - 1] + tok.start[1]
            done = line_starts[tok.end[0] - 1] + tok.end[1]
            spans.append((tok.string, start, done))
    except (tokenize.TokenError, SyntaxError):  # IndentationError is a SyntaxError
        spans.extend(regex_token_spans(text, done))
    return spans


def regex_tokens(text: str) -> list[str]:
    """Split `text` into code tokens with a regular expression; never raises, even on broken code."""
    return [token for token, _, _ in regex_token_spans(text)]


def code_tokens(text: str) -> list[str]:
    """Split `text` into code tokens (see `code_token_spans`); comments and whitespace do not count."""
    return [token for token, _, _ in code_token_spans(text)]


def ngrams(tokens: list[str], ngram_range: tuple[int, int]) -> list[str]:
    """All n-grams of `tokens` for n in `ngram_range` (inclusive), joined by a unit separator."""
    low, high = ngram_range
    grams: list[str] = []
    for n in range(low, high + 1):
        grams.extend("\x1f".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    return grams
