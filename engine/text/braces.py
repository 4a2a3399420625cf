"""Where the block a prompt opened ends, in a braced language (JavaScript, Java, C, Go, Rust, ...: BraceEnd) or one
whose blocks close with words (Ruby's `end`, the shell's `fi`: WordEnd): its braces and block words outside strings
and comments (languages.scan over languages.pieces, the one scanner of them; no parser, no model). A completion
leaves the block at the closer of the innermost block still open at the prompt's end, so a function stops after its
body, before anything that follows."""

from __future__ import annotations

import re
from dataclasses import dataclass

import languages
from languages import Language

_BRACE = re.compile(r"[{}]")


@dataclass(frozen=True)
class BraceEnd:
    """The end of the innermost block open at the prompt's end."""

    depth: int  # braces open at the prompt's end
    inside: str | None  # the opening mark of the string or comment the prompt ends inside, or None
    language: Language

    @staticmethod
    def of(prompt: str, language: Language) -> BraceEnd | None:
        """The rule for a prompt that ends inside a block; None when no block is open there."""
        masked, inside = languages.scan(prompt, language.lexis)
        depth = masked.count("{") - masked.count("}")
        return BraceEnd(depth, inside, language) if depth > 0 else None

    def ends_at(self, text: str) -> int | None:
        """Index just after the `}` that closes the prompt's innermost open block, or None while it is open."""
        lead = self.inside or ""  # the completion goes on inside the prompt's last string or comment
        masked = languages.mask(lead + text, self.language.lexis)[len(lead) :]
        depth = self.depth
        for brace in _BRACE.finditer(masked):
            depth += 1 if brace.group() == "{" else -1
            if depth < self.depth:
                return brace.end()
        return None


@dataclass(frozen=True)
class WordEnd:
    """The end of the innermost block open at the prompt's end where words close blocks (a brace block counts too)."""

    owed: tuple[str, ...]  # the closers the prompt owes, outermost first (languages.open_blocks)
    floor: int  # how many of them are owed until the innermost block closes
    inside: str | None  # the opening mark of the string or comment the prompt ends inside, or None
    tail: str  # the prompt's last line, masked: what a block word at the completion's start has before it
    language: Language

    @staticmethod
    def of(prompt: str, language: Language) -> WordEnd | None:
        """The rule for a prompt that ends inside a block; None when none is open there (an open bracket is none)."""
        masked, inside = languages.scan(prompt, language.lexis)
        owed = languages.walk_blocks(masked, language, [])[0]
        blocks = {"}", *(closer for _, closer in language.block_words)}
        innermost = max((i for i, closer in enumerate(owed) if closer in blocks), default=None)
        if innermost is None:
            return None
        return WordEnd(tuple(owed), innermost + 1, inside, masked[masked.rfind("\n") + 1 :], language)

    def ends_at(self, text: str) -> int | None:
        """Index just after the word or brace that closes the prompt's innermost open block, or None while it is
        open."""
        lead = self.inside or ""
        masked = self.tail + languages.mask(lead + text, self.language.lexis)[len(lead) :]
        _, end = languages.walk_blocks(masked, self.language, list(self.owed), self.floor, start=len(self.tail))
        return None if end is None else end - len(self.tail)
