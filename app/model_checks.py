"""Checks the model writes where the user wrote none (CodeT, Chen et al. 2022): the model is asked, in words, for
assert lines that test the function the prompt begins; the candidates are run on them, and the ranking prefers the
candidates that agree with many others on many of them (rerank.dual_agreement), which holds up when some of the
tests are wrong.

This module builds the request for the tests and reads the asserts of its answers; app/service.py runs it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import languages
from checks import Check, parse_user_checks
from checks.check import MAX_CHECKS
from checks.extract import top_level_functions
from engine import ChatTurn, GenerationRequest, GenerationResult, answer_skips, split_answer

ORIGIN = "model"  # Check.origin of a check the model wrote
ASK = (
    "Write {n} different assert statements that test the Python function `{name}` below. Each one calls "
    "`{name}` with literal arguments and compares the result with the exact expected value using ==, one per "
    "line, typical cases and edge cases. Answer with one ```python block of asserts only.\n\n```python\n{code}```"
)


@dataclass(frozen=True)
class ModelCheckSettings:
    """How the tests are asked for."""

    rows: int = 4  # answers sampled at once (the first greedy)
    asserts_per_answer: int = 8
    temperature: float = 0.8
    max_new_tokens: int = 320
    budget_share: float = 0.3  # of the request's budget, at most
    min_left_s: float = 2.0  # asked only with this much of the budget left


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


_ASSERT = re.compile(r"^\s*assert\b.*$", re.MULTILINE)


def asserts_calling(asked: GenerationRequest, result: GenerationResult, name: str) -> Iterator[Check]:
    """The assert lines of the answers that call `name` and read as checks, in order (repeats included)."""
    for row in result.candidates:
        code = split_answer(row.text, skip=answer_skips(asked)).code or row.text
        for line in _ASSERT.findall(code):
            if f"{name}(" not in line:
                continue
            try:
                (check,) = parse_user_checks(line.strip())
            except ValueError:
                continue
            yield check


def model_checks(tests: GenerationRequest, result: GenerationResult, name: str) -> list[Check]:
    """The distinct asserts of the answers that call `name` and read as checks (MAX_CHECKS at most), origin
    "model"; a line that does not read as one is left out."""
    found: dict[tuple[str, str], Check] = {}
    for check in asserts_calling(tests, result, name):
        found.setdefault((check.expression, check.expected), replace(check, line=len(found) + 1, origin=ORIGIN))
    return list(found.values())[:MAX_CHECKS]
