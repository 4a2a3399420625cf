"""An answer to a request in words: prose with the code in a fenced block. Which block is the code (the candidate),
the prose beside it (its explanation), and where an answer may stop (once that block closes)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.types import GenerationRequest

_OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<marks>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n", re.MULTILINE)
# Blocks that show how to run or what comes out, not the code asked for ("pip install numpy" before the function):
# an answer's code is its first block of another kind, unless the request is for a shell script.
NOT_CODE_FENCES = frozenset({"bash", "sh", "shell", "console", "shell-session", "zsh", "text", "txt", "output",
                             "plaintext", "cmd", "powershell", "ps"})  # fmt: skip


@dataclass(frozen=True)
class Answer:
    """One answer, split: its code block, and the prose around it."""

    code: str  # the block's text, less the fence's own indentation (to the answer's end when not closed); "" if none
    explanation: str  # the prose before the block (and after it, where the answer went on)
    fence: str  # the block's info word, lower case ("python", "js"); "" when it named none or there is no block


def answer_skips(request: GenerationRequest) -> frozenset[str]:
    """The fences whose blocks are not the answer's code, for this request (none for a shell script)."""
    return frozenset() if request.language.name == "shell" else NOT_CODE_FENCES


def split_answer(text: str, skip: frozenset[str] = NOT_CODE_FENCES) -> Answer:
    """The code and the prose of an answer: its first fenced block whose info word is not in `skip` (else its first
    block); a text without a fence is all prose."""
    block = _code_block(text, skip)
    if block is None:
        return Answer("", text.strip(), "")
    opening, closing = block
    end = closing[0] if closing is not None else len(text)
    code = _dedent(text[opening.end() : end], opening.group("indent"))
    after = "" if closing is None else text[closing[1] :]
    explanation = "\n\n".join(part.strip() for part in (text[: opening.start()], after) if part.strip())
    info = opening.group("info").strip().split()
    return Answer(code.rstrip("\n") + "\n" if code.strip() else "", explanation, info[0].lower() if info else "")


def _code_block(text: str, skip: frozenset[str]) -> tuple[re.Match, tuple[int, int] | None] | None:
    """(the opening fence, where its closing fence begins and ends or None) of the answer's code block, or None."""
    blocks = []
    for opening in _OPENING.finditer(text):
        if blocks and blocks[-1][1] is None:
            break  # the previous block is still open: what follows is inside it
        if blocks and opening.start() < blocks[-1][1][1]:
            continue  # a fence inside the previous block
        blocks.append((opening, _closing_fence(text, opening.end(), opening.group("marks"))))
        info = opening.group("info").strip().split()
        if (info[0].lower() if info else "") not in skip:
            return blocks[-1]
    return blocks[0] if blocks else None


def _closing_fence(text: str, start: int, marks: str) -> tuple[int, int] | None:
    """(where the closing fence's line begins, where it ends) after `start`, or None: a line of at least as many of
    the same marks and nothing else."""
    pattern = re.compile(rf"^[ \t]*{re.escape(marks[0])}{{{len(marks)},}}[ \t]*$\n?", re.MULTILINE)
    found = pattern.search(text, start)
    return (found.start(), found.end()) if found is not None else None


def _dedent(code: str, indent: str) -> str:
    """The block's lines less the indentation its fence had (a block inside a list item)."""
    if not indent:
        return code
    return "".join(line[len(indent) :] if line.startswith(indent) else line for line in code.splitlines(True))


@dataclass(frozen=True)
class FirstBlockEnd:
    """A stop rule of answers: the answer ends where its code block closes (the prose that would follow is not
    needed: the block is the candidate); blocks of the kinds in `skip` (a `pip install` line) are read past."""

    skip: frozenset[str] = field(default=NOT_CODE_FENCES)

    def ends_at(self, text: str) -> int | None:
        """Index in the answer where the closing fence of its code block begins, or None while it is open."""
        block = _code_block(text, self.skip)
        if block is None or block[1] is None:
            return None
        info = block[0].group("info").strip().split()
        if (info[0].lower() if info else "") in self.skip:
            return None  # only skipped blocks so far: the code may still come
        return block[1][0]
