"""Examples the model reads where the patterns do not: a docstring that calls its function in phrasings the
extraction (checks/extract.py) does not know ("(for instance f(3) is 9)") is shown to the model, which is asked to
write each example the docstring states as an assert line. An assert is kept only where it is read, not worked out:
the prompt states its call and, right after it, its value (model_examples.grounded).

This module builds the request and reads its answer; app/service.py runs it where the patterns found fewer examples
than the docstring calls its function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from app.model_checks import asking, asserts_calling
from checks import Check
from checks.check import MAX_CHECKS, VALUE
from engine import GenerationRequest, GenerationResult

ORIGIN = "model-read"  # Check.origin of an example the model read from the docstring
ASK = (
    "Here is the start of a Python function. Its docstring gives examples of calls of `{name}` and their results. "
    "Write each example the docstring states as one line `assert {name}(...) == result`, with the arguments and "
    "the result exactly as the docstring gives them. Write no example the docstring does not state. Answer with one "
    "```python block of asserts only.\n\n```python\n{code}```"
)


@dataclass(frozen=True)
class ExampleReaderSettings:
    """How the docstring's examples are asked for."""

    max_new_tokens: int = 320
    budget_share: float = 0.25  # of the request's budget, at most
    min_left_s: float = 2.0  # asked only with this much of the budget left

    def __post_init__(self):
        if not 16 <= self.max_new_tokens <= 2048:
            raise ValueError(f"max_new_tokens={self.max_new_tokens!r} is out of range: it must be in 16..2048")
        if not 0 < self.budget_share <= 1:
            raise ValueError(f"budget_share={self.budget_share!r} is out of range: it must be in (0, 1]")


def unread_calls(prompt: str, name: str, found: list[Check]) -> int:
    """How many more calls of `name` the prompt makes after its definition than the examples found make (0: all
    read); a call inside a call counts in both."""
    at = re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(", prompt, re.MULTILINE)
    if at is None:
        return 0
    call = _call_of(name)
    made = sum(len(call.findall(c.expression)) for c in found)
    return max(0, len(call.findall(prompt[at.end() :])) - made)


def _call_of(name: str) -> re.Pattern:
    """A call of function `name` (not of a method or another name that ends in it)."""
    return re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(")


def examples_request(request: GenerationRequest, name: str, settings: ExampleReaderSettings) -> GenerationRequest:
    """The request in words that asks the model to write the prompt's examples as asserts (one greedy answer)."""
    ask = ASK.format(name=name, code=request.prompt.rstrip() + "\n")
    return asking(request, ask, 1, 0.0, settings.max_new_tokens, settings.budget_share)


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _loose(text: str) -> str:
    """A pattern of `text` that allows any blanks between its characters and either quote for a quote."""
    pieces = ["['\"]" if ch in "'\"" else re.escape(ch) for ch in _squeezed(text)]
    return r"\s*".join(pieces)


def grounded(check: Check, prompt: str, name: str) -> bool:
    """Whether the prompt states the check: its call (blanks and quote marks aside) and, after it and before the
    next call of `name` (within a few lines), its value as a whole word. The example is read from the docstring,
    not worked out by the model."""
    value = _loose(check.expected)
    if check.expected.strip() in ("True", "False", "None"):
        value = f"(?i:{value})"  # "returns true" states True
    value = (r"(?<![\w.])" if check.expected.strip()[:1].isalnum() else "") + value
    value += r"(?!\w|\.\d)" if check.expected.strip()[-1:].isalnum() else ""  # "is 2." ends a sentence
    next_call = _call_of(name)
    for call in re.finditer(_loose(check.expression), prompt):
        following = prompt[call.end() : call.end() + 400]
        after = next_call.search(following)
        following = following[: after.start()] if after else following
        if re.search(value, following):
            return True
    return False


def read_examples(
    asked: GenerationRequest, result: GenerationResult, prompt: str, name: str, found: list[Check]
) -> list[Check]:
    """The asserts of the answer to `asked` that call `name`, read as value checks, stated by `prompt` (grounded)
    and not among `found`; origin "model-read", each at the prompt's line that holds its call. With `found`,
    MAX_CHECKS at most."""
    known = {(_squeezed(c.expression), _squeezed(c.expected)) for c in found}
    read: list[Check] = []
    for check in asserts_calling(asked, result, name):
        key = (_squeezed(check.expression), _squeezed(check.expected))
        if check.compare != VALUE or key in known or not grounded(check, prompt, name):
            continue
        known.add(key)
        read.append(replace(check, line=_line_of(check, prompt) or len(found) + len(read) + 1, origin=ORIGIN))
    return read[: max(0, MAX_CHECKS - len(found))]


def _line_of(check: Check, prompt: str) -> int | None:
    """The 1-based line of the prompt that holds the check's call, blanks aside; None where no line does."""
    call = _squeezed(check.expression)
    return next((i for i, line in enumerate(prompt.splitlines(), start=1) if call in _squeezed(line)), None)
