"""Checks the model writes where the user wrote none (CodeT, Chen et al. 2022): the model is asked, in words, for
assert lines that test the function the prompt begins; the candidates are run on them, and the ranking prefers the
candidates that agree with many others on many of them (rerank.dual_agreement), which holds up when some of the
tests are wrong.

The tests come in one of two forms (FORMS): asked in words (CHAT, CodeT's request), or written by the model going
on past code into an assert line (CONTINUATION). In the continuation form, where the engine writes tails, each row of
the request's own round goes on past its code into one assert line in the same batch (`with_tails`, read by
`tail_checks`; engine/tails.py); a source without tails gets a second request that goes on past the first row that
ended by itself (`continuation_request`).

This module builds the requests for the tests and reads the asserts of their answers; app/service.py runs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import languages
from checks import Check, parse_user_checks
from checks.check import MAX_CHECKS
from checks.extract import top_level_functions
from checks.stated import stated_checks
from engine import ChatTurn, GenerationRequest, GenerationResult, answer_skips, split_answer

ORIGIN = "model"  # Check.origin of a check the model wrote
ASK = (
    "Write {n} different assert statements that test the Python function `{name}` below. Each one calls "
    "`{name}` with literal arguments and compares the result with the exact expected value using ==, one per "
    "line, typical cases and edge cases. Answer with one ```python block of asserts only.\n\n```python\n{code}```"
)


CHAT, CONTINUATION = "chat", "continuation"  # the forms the tests are asked in
FORMS = (CHAT, CONTINUATION)


@dataclass(frozen=True)
class ModelCheckSettings:
    """How the tests are asked for: in words (CHAT: CodeT's request, the prompt's function shown), or by letting the
    model go on past the greedy candidate into assert lines (CONTINUATION: the prompt and the candidate are read
    already, so no instructions are read and the answer is the tests alone)."""

    form: str = CHAT
    rows: int = 4  # answers sampled at once (the first greedy)
    asserts_per_answer: int = 8
    temperature: float = 0.8
    max_new_tokens: int = 320
    budget_share: float = 0.3  # of the request's budget, at most
    min_left_s: float = 2.0  # asked only with this much of the budget left

    def __post_init__(self):
        if self.form not in FORMS:
            raise ValueError(f"form={self.form!r} is unknown: choose one of {', '.join(FORMS)}")


def model_tests(form: str | None) -> ModelCheckSettings | None:
    """The settings of the tests the model writes in `form` (FORMS), or None (off) for None."""
    if form is None:
        return None
    return CONTINUED if form == CONTINUATION else ModelCheckSettings(form=form)


# the continuation's defaults: one assert line a row, 4 rows (measured: docs/MEASUREMENTS.md)
CONTINUED = ModelCheckSettings(form=CONTINUATION, max_new_tokens=32)


def tested_function(request: GenerationRequest) -> str | None:
    """The function a Python continuation completes (the last top-level one the prompt defines), else None."""
    if request.in_words or request.is_infill or request.language is not languages.PYTHON:
        return None
    names = list(top_level_functions(request.prompt))
    return names[-1] if names else None


def tests_request(request: GenerationRequest, settings: ModelCheckSettings = ModelCheckSettings()):
    """The request in words that asks for the tests of the prompt's function, or None where there is none."""
    name = tested_function(request)
    if name is None:
        return None
    ask = ASK.format(n=settings.asserts_per_answer, name=name, code=request.prompt.rstrip() + "\n")
    return asking(request, ask, settings.rows, settings.temperature, settings.max_new_tokens, settings.budget_share)


def asking(request: GenerationRequest, ask: str, k: int, temperature: float, max_new_tokens: int, share: float):
    """The request in words that puts `ask` to the model in place of `request` (k answers, the first greedy; a
    `share` of its budget)."""
    return replace(
        request,
        prompt=ask,
        turns=(ChatTurn("user", ask),),
        k=k,
        temperature=temperature,
        greedy_first=True,
        max_new_tokens=max_new_tokens,
        budget_s=max(request.budget_s * share, 1.0),
        stop=(),
        stop_at_body_end=False,
    )


# Where the model goes on past a candidate into tests of its own (the continuation form), each row writes one assert:
# it ends with its line (measured: rows of one line did as well as rows of several, for a third of the time).
CONTINUATION_STOPS = ("\n",)


def continuation_request(request: GenerationRequest, program: str, settings: ModelCheckSettings = ModelCheckSettings()):
    """The request that lets the model go on past `program` (the prompt and one candidate) into an assert line that
    calls the prompt's function: the prompt ends with `assert name(`, so every row begins a test and ends with its
    line; None where the prompt has no function."""
    name = tested_function(request)
    if name is None:
        return None
    return replace(
        request,
        prompt=continued(program, name, ""),
        k=settings.rows,
        temperature=settings.temperature,
        greedy_first=True,
        max_new_tokens=settings.max_new_tokens,
        budget_s=max(request.budget_s * settings.budget_share, 1.0),
        stop=CONTINUATION_STOPS,
        stop_at_body_end=False,
        suffix="",
        extra=(),
    )


ASSERT_AFTER = "\n\n\nassert "  # where the model goes on past a candidate's code into a test of it


def continued(program: str, name: str, text: str) -> str:
    """`program` with a row of a continuation_request after it."""
    return f"{program.rstrip()}{ASSERT_AFTER}{name}({text}"


def with_tails(request: GenerationRequest, settings: ModelCheckSettings | None) -> GenerationRequest:
    """The request whose rows each go on past their own code into an assert line (the engine's tails: the
    continuation form's tests written in the same batch, no second request), where `settings` ask for the
    continuation: `assert name(` after a Python prompt's function, `assert` inside a Python answer's code block
    (the answer names its function); else the request as it is."""
    if settings is None or settings.form != CONTINUATION or request.language is not languages.PYTHON:
        return request
    if request.in_words:  # the model writes the space and the name as one token, as it would
        return replace(request, tail=ASSERT_AFTER.rstrip())
    name = tested_function(request)
    return replace(request, tail=f"{ASSERT_AFTER}{name}(") if name is not None else request


def tail_checks(result: GenerationResult, name: str | None, codes: list[str] | None = None) -> list[Check]:
    """The distinct checks the rows' tails state, origin "model": each an assert line that calls `name` (a tail
    after `assert name(`), or where `name` is None (a tail after `assert`) a function its row's code (`codes`)
    defines; a tail cut mid-line does not parse and states none."""
    found = []
    for row, code in zip(result.candidates, codes or [""] * len(result.candidates)):
        if not row.tail:
            continue
        if name is not None:
            found.extend(_asserts(f"assert {name}({row.tail}", name))
            continue
        found.extend(c for defined in top_level_functions(code) for c in _asserts(f"assert{row.tail}", defined))
    return _distinct(found)


def continued_checks(result: GenerationResult, program: str, name: str) -> list[Check]:
    """The distinct checks the rows of a continuation_request state (each row, one line, read after `program` as a
    candidate's own: checks/stated.py; a row cut mid-line does not parse and states none) that call `name`, origin
    "model"."""
    found = []
    for row in result.candidates:
        found.extend(c for c in stated_checks(continued(program, name, row.text)) if _calls(c.expression, name))
    return _distinct(found)


def tests_asked(request: GenerationRequest, program: str | None, settings: ModelCheckSettings):
    """The request for the model's tests in the settings' form (the continuation goes on past `program`: the prompt
    and a candidate that ended by itself), or None where the prompt has no function to test or the continuation has
    no program to go on from."""
    if settings.form == CHAT:
        return tests_request(request, settings)
    return continuation_request(request, program, settings) if program is not None else None


def tests_written(asked: GenerationRequest, result: GenerationResult, name: str, program: str | None, settings):
    """The checks the answers to `tests_asked`'s request hold, read as its form writes them."""
    if settings.form == CONTINUATION:
        return continued_checks(result, program, name)
    return model_checks(asked, result, name)


_ASSERT = re.compile(r"^\s*assert\b.*$", re.MULTILINE)


def _calls(code: str, name: str) -> bool:
    """Whether `code` calls `name` (the name as a word: `my_add(` is not a call of `add`)."""
    return re.search(rf"\b{re.escape(name)}\(", code) is not None


def _asserts(code: str, name: str) -> Iterator[Check]:
    for line in _ASSERT.findall(code):
        if not _calls(line, name):
            continue
        try:
            (check,) = parse_user_checks(line.strip())
        except ValueError:
            continue
        yield check


def asserts_calling(asked: GenerationRequest, result: GenerationResult, name: str) -> Iterator[Check]:
    """The assert lines of the answers that call `name` and read as checks, in order (repeats included)."""
    for row in result.candidates:
        yield from _asserts(split_answer(row.text, skip=answer_skips(asked)).code or row.text, name)


def model_checks(tests: GenerationRequest, result: GenerationResult, name: str) -> list[Check]:
    """The distinct asserts of the answers that call `name` and read as checks (MAX_CHECKS at most), origin
    "model"; a line that does not read as one is left out."""
    return _distinct(asserts_calling(tests, result, name))


def _distinct(checks: Iterable[Check]) -> list[Check]:
    found: dict[tuple[str, str], Check] = {}
    for check in checks:
        found.setdefault((check.expression, check.expected), replace(check, line=len(found) + 1, origin=ORIGIN))
    return list(found.values())[:MAX_CHECKS]
