"""What the app accepts from a request: its limits and defaults, and the validation that turns form or API fields
into an engine GenerationRequest (InvalidRequest names the bad value and the allowed range)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import languages
from checks import Check, parse_user_checks
from engine import ChatTurn, ContextFile, GenerationRequest, InvalidRequest

# The default time budget (seconds). Measured end to end on this shared 2-core CPU with today's engine (bundled
# 1.5B + 0.5B draft in bf16, drafter auto, k=8, T=0.8, the first 10 HumanEval prompts, candidates ending at the end
# of the function): about 20 s per prompt for all 8 candidates (issue 13's table), and about twice that on a busy
# machine. 60 s lets typical prompts finish with room to spare, and a row that never stops holds the user for one
# minute, not two. A budget is a deadline, not a duration: a run ends as soon as all k candidates finish.
DEFAULT_BUDGET_S = 60.0


MAX_K_LIMIT = 32  # the largest --max-k a server may be started with
SINGLE_CHOICES = ("greedy", "ranked")  # what /infill's one suggestion is (--infill-single)


@dataclass(frozen=True)
class Limits:
    """What the app accepts from a request (the engine's own limits are wider)."""

    max_k: int = 16  # candidates per request: 1..max_k
    min_budget_s: float = 1.0  # seconds per request: min_budget_s..max_budget_s
    max_budget_s: float = 120.0
    max_new_tokens: int = 1024  # tokens per candidate: 1..max_new_tokens
    max_temperature: float = 2.0  # 0 (greedy)..max_temperature
    max_prompt_chars: int = 100_000  # a cheap bound before tokenizing; the engine checks the context in tokens

    def __post_init__(self):
        if not 1 <= self.max_k <= MAX_K_LIMIT:
            raise ValueError(f"max_k={self.max_k!r} is out of range: it must be an integer in 1..{MAX_K_LIMIT}")
        if not 1 <= self.max_budget_s <= 3600:
            raise ValueError(f"max_budget_s={self.max_budget_s!r} is out of range: it must be in 1..3600 seconds")


@dataclass(frozen=True)
class Defaults:
    """The values a form starts with and an API call gets for the fields it leaves out."""

    k: int = 12  # more first drafts right on HumanEval than k=8, on both halves, for a little more time to the
    # answer (docs/MEASUREMENTS.md)
    budget_s: float = DEFAULT_BUDGET_S
    temperature: float = 0.8
    max_new_tokens: int = 256
    top_p: float = 0.95
    seed: int = -1  # -1: a fresh random seed per request

    def clipped(self, limits: Limits) -> Defaults:
        """These defaults inside the limits (a small --max-k or --max-budget lowers them)."""
        return Defaults(
            min(self.k, limits.max_k),
            min(max(self.budget_s, limits.min_budget_s), limits.max_budget_s),
            self.temperature,
            min(self.max_new_tokens, limits.max_new_tokens),
            self.top_p,
            self.seed,
        )


def build_request(
    prompt,
    *,
    k,
    budget_s,
    temperature,
    max_new_tokens,
    top_p=0.95,
    seed=-1,
    limits: Limits = Limits(),
    suffix="",
    extra: tuple[ContextFile, ...] = (),
    mode="auto",
    language=None,
    filename: str | None = None,
    turns: tuple[ChatTurn, ...] = (),
    **engine_fields,
) -> GenerationRequest:
    """A validated GenerationRequest, every field by keyword (a middle when there is code after the cursor, `suffix`,
    or other files, `extra`; a request in words when `mode` says so, or `turns` are given, or the prompt reads as
    words). `seed` -1 or None: a fresh one. `engine_fields` are more GenerationRequest fields as a protocol gives
    them (`stop`, an editor's deadline policy), checked by the engine's own validation. InvalidRequest (a
    ValueError) names the bad value and the allowed range."""
    prompt = check_text(prompt, limits)
    suffix = check_text("" if suffix is None else suffix, limits, "suffix")
    for context in extra:
        check_text(context.text, limits, f"input_extra file {context.name!r}")
    k = _as_int("k", k, 1, limits.max_k)
    budget_s = _as_number("budget_s", budget_s, limits.min_budget_s, limits.max_budget_s, "seconds")
    temperature = _as_number("temperature", temperature, 0.0, limits.max_temperature, "0 means greedy")
    max_new_tokens = _as_int("max_new_tokens", max_new_tokens, 1, limits.max_new_tokens)
    top_p = _as_number("top_p", top_p, 0.0, 1.0, "nucleus mass")  # 0 is refused by the engine's own check
    seed = _as_int("seed", -1 if seed is None else seed, -1, 2**63 - 1)
    if temperature == 0:
        k = 1  # greedy decoding has one answer: k rows would compute it k times (Pipeline.run says so)
    # Row 0 is the greedy answer, the others samples: measured on HumanEval (shipped configuration), greedy passes
    # more often than a sample (70.1% against 62.7%), and with it among the k the ranked first draft passes more
    # often (70.7% against 69.5% for the same ranker over k samples; rerank/settings.py)
    turns = _turns_of(prompt, suffix or extra, mode, turns)
    detection = _language_of(turns[-1].content if turns else prompt, language, filename)
    request = GenerationRequest(
        prompt=prompt,
        k=k,
        max_new_tokens=max_new_tokens,
        budget_s=budget_s,
        temperature=temperature,
        top_p=top_p,
        seed=None if seed == -1 else seed,
        suffix=suffix,
        extra=tuple(extra),
        greedy_first=k > 1,
        language=detection.language,
        language_from=detection.how,
        turns=turns,
        **({"stop_at_body_end": not turns} | engine_fields),
    )
    request.validate()  # the engine's own checks (an empty prompt among them)
    return request


def stop_strings(value, name: str = "stop") -> tuple[str, ...]:
    """A protocol's stop field (absent, a string, or a list of strings), as the engine's stop strings; InvalidRequest
    names a value of another kind or an empty string in a list."""
    if value is None or value == []:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not (isinstance(stops, (list, tuple)) and all(isinstance(s, str) and s for s in stops)):
        raise InvalidRequest(f"{name}={value!r} is invalid: give a string or a list of non-empty strings")
    return tuple(stops)


def capped_tokens(value, limits: Limits):
    """A protocol's token count with "no limit" (-1) or more than the app's most read as the app's most, as
    llama-server caps n_predict by its own -n (Continue asks for 4096 by default); anything else is left for
    build_request to validate."""
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= limits.max_new_tokens:
        return limits.max_new_tokens
    return value


MODES = ("auto", "code", "words")  # what a prompt is: recognised, code to continue, or a request in words


def reads_as_words(text: str) -> bool:
    """Whether a prompt is a request in words rather than code: its first line is a sentence (most of it letters and
    blanks, not indented, not a comment, not a statement or a command), of four words or more, or a shorter one that
    ends like a sentence ("Reverse a string.", "Fix this bug:")."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    words = first.split()
    if not words or first[0].isspace() or first.startswith(_CODE_STARTS) or _CODE_MARKS.search(first):
        return False
    head = words[0].rstrip(":(").lower()
    if head in _STATEMENTS or (head in _COMMANDS and words[0][0].islower()):
        return False
    if len(words) < 4 and not first.rstrip().endswith((".", ":", "?")):
        return False
    letters = sum(c.isalpha() or c.isspace() for c in first)
    return letters >= 0.8 * len(first) and not first.rstrip().endswith(("{", ";", "(", ",", "="))


_CODE_STARTS = ("#", "//", "/*", "*/", "--", "<", "@", '"', "'", "`", "$", "%", "!", "[", "{", "(", ";")
# a line of code: a statement's punctuation, an assignment or a call at its start, a shell's operators or flags
_CODE_MARKS = re.compile(r"[;{}]|^\s*[\w.\[\]]+\s*[-+*/]?=[^=]|^\s*[\w.]+\(|&&|\|\||\s--?[a-z]")
_STATEMENTS = frozenset(  # words that begin a line of code in some language (a sentence does not begin so)
    "def class import from function const let var fn func package public private protected static using namespace "
    "async await pub impl struct enum interface module select insert update delete create alter drop with "
    "include require return".split()
)
_COMMANDS = frozenset(  # commands a shell line begins with, in lower case (a sentence may begin "Print the ...")
    "echo print printf cd ls mkdir rm cp mv cat grep sed awk sudo apt pip npm npx yarn git docker curl wget make "
    "cargo go python python3 node java javac gcc g++ rustc chmod export source".split()
)


def _turns_of(prompt: str, middle: object, mode, turns: tuple[ChatTurn, ...]) -> tuple[ChatTurn, ...]:
    """The conversation of a request in words, or () for code: `turns` as given, else the prompt as the user's
    turn when `mode` is "words", or "auto" and it reads as words (a middle is always code)."""
    if mode not in MODES:
        raise InvalidRequest(f"mode={mode!r} is unknown: choose one of {', '.join(MODES)}")
    if turns:
        return tuple(turns)
    if mode == "words" and middle:
        raise InvalidRequest("mode='words' takes no code after the cursor: leave suffix empty, or use mode 'code'")
    if mode == "words" or (mode == "auto" and not middle and reads_as_words(prompt)):
        return (ChatTurn("user", prompt),)
    return ()


def _language_of(text: str, language, filename: str | None) -> languages.Detection:
    """The language the client named (`language`, `filename`), else what the text says; InvalidRequest names an
    unknown one."""
    if language is not None and not isinstance(language, str):
        raise InvalidRequest(f"language={language!r} is invalid: it must be a language's name")
    try:
        return languages.detect(text, language if language and language != "auto" else None, filename)
    except ValueError as err:
        raise InvalidRequest(str(err)) from None


@dataclass(frozen=True)
class CheckRequest:
    """What a request asks of the checks: the user's own assert lines, and whether to run any checks at all (the
    prompt's examples are always looked for)."""

    user: tuple[Check, ...] = ()  # the user's checks, in their order
    run: bool = True  # False: nothing is run, the ranking is consistency's alone
    search: bool = True  # where no candidate passes every check, draw more rounds while the budget allows


def build_checks(text="", run=True, language: languages.Language | None = None, search=True) -> CheckRequest:
    """A validated CheckRequest from a form's or an API's `checks` (assert lines in the request's `language`: text, or
    a list of lines), `run_checks` and `search`; InvalidRequest names the bad line or value."""
    if isinstance(text, (list, tuple)) and all(isinstance(line, str) for line in text):
        text = "\n".join(text)
    if not isinstance(text, str):
        raise InvalidRequest(f"checks must be text (assert lines) or a list of them, got {type(text).__name__}")
    if not isinstance(run, bool):
        raise InvalidRequest(f"run_checks={run!r} is invalid: it must be true or false")
    if not isinstance(search, bool):
        raise InvalidRequest(f"search={search!r} is invalid: it must be true or false")
    try:
        return CheckRequest(tuple(parse_user_checks(text, language)), run, search)
    except ValueError as err:
        raise InvalidRequest(str(err)) from None


def check_text(prompt, limits: Limits, name: str = "prompt") -> str:
    if not isinstance(prompt, str):
        raise InvalidRequest(f"{name} must be text, got {type(prompt).__name__}")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates: JSON can carry them, UTF-8 cannot
        raise InvalidRequest(
            f"{name} is not valid UTF-8 text: character {err.start} is {prompt[err.start]!a}, a "
            "lone surrogate; send UTF-8 text"
        ) from None
    if len(prompt) > limits.max_prompt_chars:
        raise InvalidRequest(f"{name} is {len(prompt)} characters: it must be 1..{limits.max_prompt_chars} characters")
    return prompt


def _as_int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # sliders and JSON numbers may send 8.0
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequest(f"{name}={value!r} is out of range: it must be an integer in {low}..{high}")
    return value


def _as_number(name: str, value, low: float, high: float, unit: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not low <= value <= high:
        raise InvalidRequest(f"{name}={value!r} is out of range: it must be a number in {low:g}..{high:g} ({unit})")
    return float(value)
