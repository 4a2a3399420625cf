"""Per-row bookkeeping of generated tokens and the stopping rules: end-of-text tokens, length, stop strings, the end
of the function body and, for a middle, the code after the cursor written again; one rule for every candidate."""

from __future__ import annotations

from dataclasses import dataclass, field

import languages
from engine.text.answer import FirstBlockEnd, answer_skips
from engine.text.blocks import BodyEnd
from engine.text.braces import BraceEnd, WordEnd
from engine.types import FINISH_LENGTH, FINISH_STOP, Candidate, GenerationRequest


def earliest_stop(text: str, stops: tuple[str, ...], search_from: int = 0) -> int | None:
    """Index in text where the first stop string begins (searching from search_from), or None."""
    hits = [i for i in (text.find(s, search_from) for s in stops) if i >= 0]
    return min(hits) if hits else None


TAIL_TOKENS = 32  # a tail's line, at most (one assert line: measured in docs/MEASUREMENTS.md)


@dataclass
class Tail:
    """What a row writes past its own end (GenerationRequest.tail): it goes on from its first `kept` tokens, reads the
    tail's text (`ids[:read]`, forced: the first is the row's pending token, `queue` the rest, read in the next
    round as a draft taken whole) and writes one line after it (`text`)."""

    kept: int  # the row's tokens it goes on from (its code, without trailing blanks)
    ids: list[int]  # the tail's tokens held or pending: the forced ones first, then the written ones
    read: int  # how many of ids (and queue) are forced
    queue: list[int] = field(default_factory=list)  # forced tokens not read yet
    text: str = ""  # the line written after the forced text
    done: bool = False  # it takes no more tokens (its line ended, or it was cut)
    ended: bool = False  # its line ended by itself (a newline or an end-of-text token): not cut


@dataclass
class RowState:
    """One candidate as it grows: committed tokens, their log-probabilities, its text and whether it is done; past
    its end, the tail it writes (where the request asks for one)."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    tail: Tail | None = None

    @property
    def history(self) -> list[int]:
        """The tokens the model has read or will read next for this row: its own, or those its tail goes on from
        and the tail's (the last one pending, not yet cached)."""
        if self.tail is None:
            return self.token_ids
        return self.token_ids[: self.tail.kept] + self.tail.ids

    @property
    def growing(self) -> bool:
        """Whether the row still takes part in the batch: unfinished, or writing its tail."""
        return self.finish_reason is None or (self.tail is not None and not self.tail.done)

    def as_candidate(self) -> Candidate:
        ended = self.tail is not None and self.tail.ended
        tail = self.tail.text if ended else None  # a line cut by its limit, the deadline or a stop may mislead
        return Candidate(self.text, list(self.token_ids), list(self.logprobs), self.finish_reason, tail)


@dataclass(frozen=True)
class SuffixEcho:
    """Where a middle runs into the code after the cursor: a whole line of the middle that repeats the first
    non-blank line of the suffix (after the rest of the cursor's own line) ends the middle before it."""

    line: str  # that suffix line, without its indentation
    first_is_whole: bool  # the cursor is at a line's start (only blanks before it), so the middle's first line counts

    @staticmethod
    def of(prompt: str, suffix: str) -> SuffixEcho | None:
        following = [line.strip() for line in suffix.split("\n")[1:] if line.strip()]
        if not following:
            return None
        return SuffixEcho(following[0], not prompt.rpartition("\n")[2].strip())

    def ends_at(self, text: str, final: bool = False) -> int | None:
        """Index in the middle where the repeated line begins, or None; a last line without its newline counts
        only once the middle is over (final), since it may still grow into another line."""
        offset = 0
        lines = text.split("\n")
        for index, line in enumerate(lines):
            whole = index < len(lines) - 1 or final
            if whole and (index > 0 or self.first_is_whole) and line.strip() == self.line:
                kept = text[:offset].rstrip()  # the blank lines before it too: the suffix brings its own
                return len(kept) + 1 if kept else 0
            offset += len(line) + 1
        return None


def line_end_after(text: str, mark: int) -> int | None:
    """Where a row past its budget ends: just after the first newline at or after `mark` (its text's length at the
    deadline), or None while it has written none (llama.cpp's t_max_predict_ms)."""
    found = text.find("\n", mark)
    return found + 1 if found >= 0 else None


@dataclass(frozen=True)
class IndentEnd:
    """llama.cpp's n_indent: a middle ends before its first new line that is indented less than `indent` columns
    (the line's newline is kept; its indentation and text are not)."""

    indent: int

    def ends_at(self, text: str) -> int | None:
        start = text.find("\n") + 1
        while start > 0:
            end = text.find("\n", start)
            line = text[start:] if end < 0 else text[start:end]
            body = line.lstrip(" \t")
            if body and len(line) - len(body) < self.indent:
                return start
            start = end + 1 if end >= 0 else 0
        return None


def block_end(request: GenerationRequest) -> BodyEnd | BraceEnd | WordEnd | FirstBlockEnd | None:
    """Where a row leaves what it was asked to write: an answer's first code block (a request in words), or the
    function (Python) or block (braced, or closed by words: Ruby, shell) the prompt opened; None when the rule is
    off."""
    if request.in_words:
        return FirstBlockEnd(answer_skips(request))
    if not request.stop_at_body_end:
        return None
    language = request.language
    if language.blocks == languages.INDENT:
        return BodyEnd.of(request.prompt)
    if language.blocks == languages.BRACES and not request.is_infill:  # a middle's block closes in its suffix
        return BraceEnd.of(request.prompt, language)
    if language.blocks == languages.KEYWORDS and not request.is_infill:
        return WordEnd.of(request.prompt, language)
    return None


@dataclass(frozen=True)
class StopRules:
    """Everything that ends a row, for one request."""

    eos_ids: frozenset[int]  # every token that ends a text (see end_of_text_ids)
    stops: tuple[str, ...]
    max_new_tokens: int
    body: BodyEnd | BraceEnd | WordEnd | FirstBlockEnd | None = (
        None  # where a row leaves what it was asked for (block_end)
    )
    echo: SuffixEcho | None = None  # a middle's end where it repeats the code after the cursor; None: not a middle
    indent: IndentEnd | None = None  # a middle's end at a line indented less than the request's min_indent

    @staticmethod
    def of(
        request: GenerationRequest, eos_ids: frozenset[int], form_stops: tuple[str, ...] = (), healed: bool = False
    ) -> StopRules:
        """The rules of a request (local and remote rows alike); form_stops: what the prompt's form adds (the chat
        form's closing fence); healed: the first token repeats the typed text (token healing), one more is allowed."""
        return StopRules(
            eos_ids,
            tuple(request.stop) + form_stops,
            request.max_new_tokens + int(healed),
            block_end(request),
            SuffixEcho.of(request.prompt, request.suffix) if request.suffix else None,
            IndentEnd(request.min_indent) if request.min_indent > 0 else None,
        )

    def extend(self, row: RowState, tokens: list[int], logprobs: list[float], decode) -> None:
        """Append newly committed tokens to a row, applying end-of-text tokens, max length, then stop strings and
        the end of the body (the earliest of the two cuts the text)."""
        for position, token in enumerate(tokens):
            if token in self.eos_ids:
                tokens, logprobs, row.finish_reason = tokens[:position], logprobs[:position], FINISH_STOP
                break
        room = self.max_new_tokens - len(row.token_ids)
        if len(tokens) >= room and row.finish_reason is None:
            row.finish_reason = FINISH_LENGTH
        old_text_len = len(row.text)
        row.token_ids.extend(tokens[:room])
        row.logprobs.extend(logprobs[:room])
        row.text = decode(row.token_ids)
        end = self.ends_at(row.text, old_text_len, final=row.finish_reason == FINISH_STOP)
        if end is not None:
            self.end_row_at(row, end, decode)

    def extend_tail(self, tail: Tail, tokens: list[int], decode) -> None:
        """Append newly committed tokens to a row's tail (the forced ones come back as accepted drafts); its line
        ends at its first newline or an end-of-text token, and is cut at TAIL_TOKENS written."""
        for position, token in enumerate(tokens):
            if token in self.eos_ids:
                tokens, tail.ended = tokens[:position], True
                break
        tail.ids.extend(tokens)
        written = tail.ids[tail.read :]
        text = decode(written)
        line_end = text.find("\n")
        tail.text = text if line_end < 0 else text[:line_end]
        tail.ended = tail.ended or line_end >= 0
        tail.done = tail.ended or len(written) >= TAIL_TOKENS

    def ends_at(self, text: str, old_text_len: int = 0, final: bool = False) -> int | None:
        """Where a text must end by a stop string, the end of the function body or the suffix's echo (the
        earliest), or None; text before old_text_len was checked already (it holds no stop string); final: the
        text ended by itself. Local and remote rows use it alike."""
        longest_stop = max((len(s) for s in self.stops), default=0)
        ends = [
            earliest_stop(text, self.stops, max(0, old_text_len - longest_stop)),
            self.body.ends_at(text) if self.body is not None else None,
            self.echo.ends_at(text, final) if self.echo is not None else None,
            self.indent.ends_at(text) if self.indent is not None else None,
        ]
        return min((e for e in ends if e is not None), default=None)

    @staticmethod
    def end_row_at(row: RowState, end: int, decode) -> None:
        """End a row at `end`: keep the text before it and the tokens whose text lies wholly before it."""
        kept = len(row.token_ids)
        while kept > 0 and len(decode(row.token_ids[:kept])) > end:
            kept -= 1
        row.token_ids, row.logprobs = row.token_ids[:kept], row.logprobs[:kept]
        row.text = row.text[:end]
        row.finish_reason = FINISH_STOP
