"""An answer to a request in words: prose with the code in a fenced block. Where that block is (the candidate), the
prose beside it (its explanation), and where an answer may stop (once its first code block closes)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPENING = re.compile(r"^[ \t]*(?P<marks>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n", re.MULTILINE)


@dataclass(frozen=True)
class Answer:
    """One answer, split: its first code block, and the prose around it."""

    code: str  # the first fenced block's text (to the end of the answer when the block was not closed); "" if none
    explanation: str  # the prose before the block (and after it, where the answer went on)
    fence: str  # the block's info word, lower case ("python", "js"); "" when it named none or there is no block


def split_answer(text: str) -> Answer:
    """The code and the prose of an answer (a text without a fence is all prose)."""
    opening = _OPENING.search(text)
    if opening is None:
        return Answer("", text.strip(), "")
    body_start = opening.end()
    closing = _closing_fence(text, body_start, opening.group("marks"))
    code = text[body_start:] if closing is None else text[body_start : closing[0]]
    after = "" if closing is None else text[closing[1] :]
    explanation = "\n\n".join(part.strip() for part in (text[: opening.start()], after) if part.strip())
    info = opening.group("info").strip().split()
    return Answer(code.rstrip("\n") + "\n" if code.strip() else "", explanation, info[0].lower() if info else "")


def _closing_fence(text: str, start: int, marks: str) -> tuple[int, int] | None:
    """(where the closing fence's line begins, where it ends) after `start`, or None: a line of at least as many of
    the same marks and nothing else."""
    pattern = re.compile(rf"^[ \t]*{re.escape(marks[0])}{{{len(marks)},}}[ \t]*$\n?", re.MULTILINE)
    found = pattern.search(text, start)
    return (found.start(), found.end()) if found is not None else None


@dataclass(frozen=True)
class FirstBlockEnd:
    """A stop rule of answers: the answer ends where its first code block closes (the prose that would follow is
    not needed: the block is the candidate)."""

    def ends_at(self, text: str) -> int | None:
        """Index in the answer where the closing fence of its first block begins, or None while it is open."""
        opening = _OPENING.search(text)
        if opening is None:
            return None
        closing = _closing_fence(text, opening.end(), opening.group("marks"))
        return closing[0] if closing is not None else None
