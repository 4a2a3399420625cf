"""Per-row bookkeeping of generated tokens and the stopping rules: EOS, stop strings, length."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.types import FINISH_LENGTH, FINISH_STOP, Candidate


def earliest_stop(text: str, stops: tuple[str, ...], search_from: int = 0) -> int | None:
    """Index in text where the first stop string begins (searching from search_from), or None."""
    hits = [i for i in (text.find(s, search_from) for s in stops) if i >= 0]
    return min(hits) if hits else None


@dataclass
class RowState:
    """One candidate as it grows: committed tokens, their log-probabilities, its text and whether it is done."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None

    def as_candidate(self) -> Candidate:
        return Candidate(self.text, list(self.token_ids), list(self.logprobs), self.finish_reason)


@dataclass(frozen=True)
class StopRules:
    """Everything that ends a row, for one request."""

    eos_ids: frozenset[int]
    stops: tuple[str, ...]
    max_new_tokens: int

    def extend(self, row: RowState, tokens: list[int], logprobs: list[float], decode) -> None:
        """Append newly committed tokens to a row, applying EOS, max length and stop strings in that order."""
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
        longest_stop = max((len(s) for s in self.stops), default=0)
        cut = earliest_stop(row.text, self.stops, max(0, old_text_len - longest_stop))
        if cut is not None:
            self._cut_at(row, cut, decode)

    @staticmethod
    def _cut_at(row: RowState, cut: int, decode) -> None:
        """End a row before a stop string: keep the text before it and the tokens whose text lies wholly before it."""
        kept = len(row.token_ids)
        while kept > 0 and len(decode(row.token_ids[:kept])) > cut:
            kept -= 1
        row.token_ids, row.logprobs = row.token_ids[:kept], row.logprobs[:kept]
        row.text = row.text[:cut]
        row.finish_reason = FINISH_STOP
