"""Request, candidate and result records of the engine: plain data, validated at the edge."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import languages
from languages import Language

MAX_K = 32
MAX_NEW_TOKENS = 2048
FINISH_STOP = "stop"  # an end-of-text token, a stop string or the end of the function body
FINISH_LENGTH = "length"  # max_new_tokens reached
FINISH_BUDGET = "budget"  # the deadline (or a cancel) came first: the text is unfinished
FINISH_INTERRUPTED = "interrupted"  # a remote server's stream broke off: the text is what arrived
# The one list of how a candidate can end (static_eval, the OpenAI mapping and the page derive from it or are tested
# against it), and those that cut the text off where it was: it may end anywhere, even mid-token.
FINISH_REASONS = (FINISH_STOP, FINISH_LENGTH, FINISH_BUDGET, FINISH_INTERRUPTED)
CUT_REASONS = frozenset({FINISH_LENGTH, FINISH_BUDGET, FINISH_INTERRUPTED})


class SettingError(Exception):
    """An error whose message names settings its reader can change to mend it. `settings` maps each setting (its
    name, with the value where the fix is one: "drafter=sibling") to how this message spells it; `worded` gives the
    message in another caller's words for those settings (the app's command-line options, app/runs.py)."""

    def __init__(self, message: str, settings: dict[str, str] | None = None):
        super().__init__(message)
        self.settings = dict(settings or {})

    def worded(self, names: dict[str, str]) -> str:
        message = str(self)
        for setting, spelled in self.settings.items():  # as a word of its own: not inside a path, a name or a URL
            pattern = r"(?<![\w/.-])" + re.escape(spelled) + r"(?![\w/.-])"
            worded = names.get(setting, spelled)
            message = re.sub(pattern, lambda _, words=worded: words, message)
        return message


class InvalidSetting(SettingError, ValueError):
    """Settings the engine cannot work with; the message names the setting and what it accepts."""


class InvalidRequest(ValueError):
    """A request the engine cannot serve as asked; the message names the value and the allowed range."""


@dataclass(frozen=True)
class ContextFile:
    """Another file the editor has open, given to a fill-in-the-middle request as context."""

    name: str  # its path or name, as the editor calls it
    text: str


CHAT_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Deadline:
    """How a request's budget_s is kept: from the call, rows cut where they are (the default: the page's and the
    APIs' answer comes by then), or as llama.cpp's t_max_predict_ms keeps it for an editor (EDITOR_DEADLINE)."""

    after_prompt: bool = False  # the budget starts once the prompt is read
    waits_for_line: bool = False  # past the budget a row ends only once its text holds a newline, so that it has one
    # whole line; max_new_tokens bounds it

    def validate(self) -> None:
        for name in ("after_prompt", "waits_for_line"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidRequest(f"deadline.{name}={getattr(self, name)!r} is invalid: it must be true or false")


EDITOR_DEADLINE = Deadline(after_prompt=True, waits_for_line=True)  # llama.cpp's t_max_predict_ms


@dataclass(frozen=True)
class ChatTurn:
    """One turn of a conversation in words."""

    role: str  # one of CHAT_ROLES
    content: str


@dataclass(frozen=True)
class GenerationRequest:
    """What one call asks for: k sampled continuations of one prompt (or k middles between it and a suffix)."""

    prompt: str  # the code before the cursor
    k: int = 8  # number of candidates (rows), 1..32
    max_new_tokens: int = 256  # per candidate, 1..2048
    budget_s: float = 30.0  # seconds from call to answer, > 0
    temperature: float = 0.8  # >= 0; 0 means greedy
    top_p: float = 0.95  # nucleus mass, in (0, 1]
    seed: int | None = None  # fixes the samples when set
    stop: tuple[str, ...] = ()  # a row ends before the first of these strings
    stop_at_body_end: bool = True  # a row ends where its completion leaves the function the prompt opened
    suffix: str = ""  # the code after the cursor: non-empty (or extra files) asks for middles
    extra: tuple[ContextFile, ...] = ()  # other files as context of a middle
    deadline: Deadline = Deadline()  # how budget_s is kept
    greedy_first: bool = False  # row 0 decodes greedily, the other rows sample at `temperature` (local engine)
    context_tokens: int | None = None  # a middle's local context in tokens: the prefix's last 3/4 and the suffix's
    # first SUFFIX_SHARE (engine/text/infill.py), whole lines; None: all
    extra_tokens: int | None = None  # the other files' tokens at most, the files nearest the end kept; None: all
    min_indent: int = 0  # a row ends before a new line indented less than this (llama.cpp's n_indent)
    language: Language = languages.PYTHON  # the code's language, resolved once where the request is built: the chat
    # form's words and fence, and where a function's body ends
    language_from: str = ""  # how the app learned the language (languages.Detection.how), for the result only
    turns: tuple[ChatTurn, ...] = ()  # a request in words: the conversation (the last turn the user's), answered in
    # the model's chat template; each row is an answer, its code in a fenced block. Empty: `prompt` is code
    tail: str = ""  # where set, a row that ends by itself goes on past its code (blanks at its end dropped): the
    # model reads this text and writes one more line (Candidate.tail), e.g. "\n\n\nassert f(" for a test of the
    # row's own (local engine; the row's text, tokens and finish stay as they were; an answer in words goes on inside
    # its code block). Empty: rows end at their end

    @property
    def in_words(self) -> bool:
        """Whether this is a request in words (a conversation to answer) rather than code to continue."""
        return bool(self.turns)

    @property
    def is_infill(self) -> bool:
        """Whether this asks for middles between prompt and suffix (fill-in-the-middle) rather than continuations."""
        return bool(self.suffix) or bool(self.extra)

    def validate(self) -> None:
        """Raise ValueError naming the bad value and the allowed range."""
        if not isinstance(self.prompt, str) or not isinstance(self.suffix, str):
            raise InvalidRequest("prompt and suffix must be text (the code before and after the cursor)")
        if not self.prompt.strip() and not self.is_infill:  # a middle may begin an empty file
            raise InvalidRequest("prompt is empty: give some code or a function signature to complete")
        _check_int("k", self.k, 1, MAX_K)
        _check_int("max_new_tokens", self.max_new_tokens, 1, MAX_NEW_TOKENS)
        if not _is_finite(self.budget_s) or self.budget_s <= 0:
            raise InvalidRequest(f"budget_s={self.budget_s!r} is out of range: it must be a number > 0 (seconds)")
        if not _is_finite(self.temperature) or self.temperature < 0:
            raise InvalidRequest(f"temperature={self.temperature!r} is out of range: it must be >= 0 (0 means greedy)")
        if not _is_finite(self.top_p) or not 0 < self.top_p <= 1:
            raise InvalidRequest(f"top_p={self.top_p!r} is out of range: it must be in (0, 1]")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise InvalidRequest(f"seed={self.seed!r} is out of range: it must be an integer >= 0 or None")
        if not isinstance(self.deadline, Deadline):
            raise InvalidRequest(f"deadline={self.deadline!r} is invalid: it must be an engine.Deadline")
        self.deadline.validate()
        if self.context_tokens is not None:
            _check_int("context_tokens", self.context_tokens, 16, 1_000_000)
        _check_int("min_indent", self.min_indent, 0, 1000)
        if self.extra_tokens is not None:
            _check_int("extra_tokens", self.extra_tokens, 0, 1_000_000)
        if not isinstance(self.tail, str) or (self.tail and self.is_infill):
            raise InvalidRequest(f"tail={self.tail!r} is invalid: it must be text, and a middle has none")
        if not isinstance(self.greedy_first, bool):
            raise InvalidRequest(f"greedy_first={self.greedy_first!r} is invalid: it must be true or false")
        if not isinstance(self.stop_at_body_end, bool):
            raise InvalidRequest(f"stop_at_body_end={self.stop_at_body_end!r} is invalid: it must be true or false")
        if not all(isinstance(s, str) and s for s in self.stop):
            raise InvalidRequest(f"stop={self.stop!r} is invalid: stop strings must be non-empty strings")
        if not all(
            isinstance(f, ContextFile) and isinstance(f.name, str) and isinstance(f.text, str) for f in self.extra
        ):
            raise InvalidRequest("extra is invalid: each context file needs a name and a text")
        if not isinstance(self.language, Language):
            raise InvalidRequest(
                f"language={self.language!r} is invalid: it must be a languages.Language (languages.resolve gives one)"
            )
        if self.turns and self.is_infill:
            raise InvalidRequest("a request in words has no code after the cursor: send turns or suffix, not both")
        if not all(isinstance(t, ChatTurn) and t.role in CHAT_ROLES and isinstance(t.content, str) for t in self.turns):
            raise InvalidRequest(f"turns are invalid: each needs a role ({', '.join(CHAT_ROLES)}) and text content")


def _is_finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_int(name: str, value, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequest(f"{name}={value!r} is out of range: it must be an integer in {low}..{high}")


@dataclass
class Candidate:
    """One continuation of the prompt. For a healed middle (token healing) the first token repeats the typed text
    backed over: `text` leaves that out, `token_ids` and `logprobs` hold it."""

    text: str  # decoded continuation, cut before any stop string
    token_ids: list[int] = field(default_factory=list)  # generated token ids (kept ones)
    logprobs: list[float] = field(default_factory=list)  # log p_target(token) per token, at temperature 1
    finish_reason: str | None = None  # one of FINISH_REASONS; None while growing
    tail: str | None = None  # the line written past the row's end after GenerationRequest.tail; None: no tail, or
    # one cut before its line ended (its limit, the deadline, a stop)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def cut(self) -> bool:
        """Whether the text was cut off where it was (CUT_REASONS) rather than ending by itself."""
        return self.finish_reason in CUT_REASONS


@dataclass
class GenerationStats:
    """How a call went."""

    wall_s: float = 0.0  # from call to return
    prefill_s: float = 0.0  # of which reading the prompt (cache copy and chunked forwards; the first token)
    generated_tokens: int = 0  # over all rows
    forward_passes: int = 0  # target model forwards (prefill included)
    draft_passes: int = 0  # draft model forwards (0 without a model drafter)
    proposed_tokens: int = 0  # draft tokens offered for verification
    accepted_tokens: int = 0  # draft tokens the target accepted
    speculative_steps: int = 0  # verify steps that carried at least one draft token
    drafted_rows: int = 0  # row-steps that carried at least one draft token
    drafter_choices: dict[str, int] = field(default_factory=dict)  # steps (row-steps) per drafter name
    prompt_tokens: int = 0  # tokens of the prompt as the model reads it (a middle's FIM markers included)
    cached_prompt_tokens: int = 0  # of which the prefix cache gave (not computed)
    moved_prompt_tokens: int = 0  # of those, reused at another place than they were read at (an editor's window)
    prompt_read_tokens: int = 0  # of which are read so far (cached and computed; all of them once generating)

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.proposed_tokens if self.proposed_tokens else 0.0

    @property
    def mean_draft_length(self) -> float:
        """Draft tokens per row per speculative step (rows without a proposal do not count)."""
        return self.proposed_tokens / self.drafted_rows if self.drafted_rows else 0.0

    def as_dict(self) -> dict:
        return {
            "wall_s": round(self.wall_s, 4),
            "generated_tokens": self.generated_tokens,
            "tokens_per_s": round(self.tokens_per_s, 3),
            "forward_passes": self.forward_passes,
            "draft_passes": self.draft_passes,
            "proposed_tokens": self.proposed_tokens,
            "accepted_tokens": self.accepted_tokens,
            "speculative_steps": self.speculative_steps,
            "drafted_rows": self.drafted_rows,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "mean_draft_length": round(self.mean_draft_length, 3),
            "drafter_choices": dict(self.drafter_choices),
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "moved_prompt_tokens": self.moved_prompt_tokens,
            "computed_prompt_tokens": self.prompt_read_tokens - self.cached_prompt_tokens,
            "prompt_read_tokens": self.prompt_read_tokens,
            "prefill_s": round(self.prefill_s, 4),
        }


@dataclass
class GenerationResult:
    """The k candidates (in row order) and the stats of the call."""

    candidates: list[Candidate]
    stats: GenerationStats


class CandidateSource(Protocol):
    """What the app asks of a source of candidates (the local Engine, a RemoteClient in front of a server)."""

    def generate(
        self,
        request: GenerationRequest,
        on_update: Callable[[GenerationResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        """request.k candidates (in row order), returned by the request's deadline with what there is;
        on_update gets partial results while they grow, should_stop ends the run early (what there is is kept).
        Raises InvalidRequest for a request this source cannot serve (the message names the value)."""
        ...
