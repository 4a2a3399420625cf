"""The answers' own checks as evidence: where a request carries no example, each candidate's stated checks
(checks/stated.py: its asserts, its `print(f(x))  # Output: y` lines, its test functions; in JavaScript,
checks/stated_braced.py: its assert lines and `console.log(f(x)); // y`) are gathered from every row, and every
distinct candidate, without its own test code, runs on all of them in the sandbox. Dual agreement on them
(rerank.dual_agreement, CodeT's rule) then ranks after the user's checks and the model's tests: a behaviour many
candidates state and pass outranks one only its author claims, and a wrong stated value weighs little. A candidate
that fails what it states itself gets a finding that says so.

What a user copies is the code asked for: an answer's example usage (its test code after its definitions) is shown
beside the code, not in it, unless the request asks for tests, a usage example or a program (`shown_code`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import languages
from checks import CandidateChecks, Check
from checks.check import MAX_CHECKS, TRUTHY
from checks.runner import PASSED
from checks.stated import function_only, split_usage, stated_checks
from engine.types import ChatTurn, GenerationRequest
from rerank import dual_agreement

FAILS_OWN_CHECK = "fails-own-example"  # the finding's kind
# A request that asks for the test code or the top-level code itself: tests, asserts, doctests, examples or a usage
# written ("with tests", "add unit tests", "include examples", "test cases"), a demonstration, or a program that runs
# ("a script", "main()", "stdin", "reads input"). Read without its links and its inline code (`def f(x)`).
_ASKS_FOR_USAGE = re.compile(
    r"\b(?:write|add|include|includ\w+|with|and|plus|also|give)\s+(?:\w+\s+){0,2}?(?:unit[- ]?)?"
    r"(?:tests?|asserts|assertions|doctests?|examples|usage)\b"
    r"|\btest\s+(?:cases?|suites?|functions?|code|it|them|this)\b|\b(?:unit[- ]tests?|pytest|unittest)\b"
    r"|\b(?:example|sample)\s+usage\b|\busage\s+examples?\b|\bexample\s+of\s+how\b|\bdemonstrat\w*"
    r"|\bshow\s+(?:me\s+)?how\b|\b(?:programs?|scripts?|command[- ]line|stdin|standard\s+input)\b"
    r"|\b(?:reads?|takes?)\s+(?:\w+\s+){0,3}?input\b|\bfrom\s+the\s+user\b"
    r"|\bmain\s*\(|\bmain\s+(?:function|block|guard)|__main__",
    re.IGNORECASE,
)
_UNREAD = re.compile(r"https?://\S+|`[^`\n]*`")  # links and inline code: not the user's words


# Asked of the rows of a request in words, in Python, that names no system turn of its own, so that more answers state
# checks: without it 91 of 800 answers to 100 MBPP tasks asked in words stated one, with it 648 (docs/MEASUREMENTS.md,
# "Requests in words"). It takes the place of the template's default system turn.
STATE_EXAMPLES = (
    "You are a helpful assistant. When you write a function, end its code block with three example calls, each on "
    "its own line as `print(call)  # Output: the expected value`."
)


def asking_examples(request: GenerationRequest) -> GenerationRequest:
    """`request` as its rows are asked: a conversation in Python (named, or no other language named; the hint is
    written in Python) of k >= 2 rows without a system turn begins with STATE_EXAMPLES (the answers' stated checks
    then rank them); any other request as it is."""
    if request.k < 2 or not request.turns or request.language is not languages.PYTHON:
        return request
    if any(turn.role == "system" for turn in request.turns):
        return request
    return replace(request, turns=(ChatTurn("system", STATE_EXAMPLES),) + tuple(request.turns))


def asks_for_usage(text: str) -> bool:
    """Whether a request in words asks for the code that would otherwise be shown apart (see _ASKS_FOR_USAGE)."""
    return bool(_ASKS_FOR_USAGE.search(_UNREAD.sub(" ", text)))


def shown_code(code: str, request_text: str, language: str = "python") -> tuple[str, str | None]:
    """(the code shown and copied, its example usage shown beside it or None): an answer's test code after its
    definitions goes apart (checks/stated.split_usage: Python, JavaScript, TypeScript) unless the request asks for
    it."""
    if asks_for_usage(request_text):
        return code, None
    kept, usage = split_usage(code, language)
    return (kept, usage) if usage else (code, None)


@dataclass(frozen=True)
class StatedChecks:
    """The checks the rows stated (at most MAX_CHECKS, first stated first) and which rows stated each."""

    items: tuple[Check, ...]
    stated_by: tuple[tuple[int, ...], ...]  # per check, the rows (0-based) whose code states it

    def as_dict(self) -> dict:
        return {
            "items": [
                {**c.as_dict(), "label": c.label(), "stated_by": [r + 1 for r in rows]}
                for c, rows in zip(self.items, self.stated_by)
            ]
        }


def gather(programs: list[str], language: str = "python") -> StatedChecks:
    """Every row's stated checks, one of each (the same call and value from several rows is one check)."""
    rows: dict[tuple[str, str, str], list[int]] = {}
    first: dict[tuple[str, str, str], Check] = {}
    for row, program in enumerate(programs):
        for check in stated_checks(program, language):
            key = (check.expression, check.expected, check.compare)
            first.setdefault(key, check)
            rows.setdefault(key, []).append(row)
    keys = sorted(first, key=lambda key: -len(rows[key]))[:MAX_CHECKS]  # the most stated, where there are many
    return StatedChecks(tuple(first[key] for key in keys), tuple(tuple(rows[key]) for key in keys))


def cross_check(checker, programs: list[str], stated: StatedChecks, language) -> list[CandidateChecks]:
    """Each row, without its own test code, on every stated check (one sandboxed program per distinct row)."""
    return checker.run([function_only(p, str(language)) for p in programs], list(stated.items), language)


def agreement(outcomes: list[CandidateChecks]) -> list[float]:
    """Each row's dual agreement on the stated checks."""
    return dual_agreement([tuple(o.status == PASSED for o in c.outcomes) for c in outcomes])


def own_failures(
    stated: StatedChecks, outcomes: CandidateChecks, program: str, first_line: int = 1, language: str = "python"
) -> list[dict]:
    """Findings (as static_eval's, as data) for each check `program` states and fails itself: the call, the stated
    value and what came back; lines in the row's own code (`first_line`: where the row begins in its program)."""
    lines = {(c.expression, c.expected, c.compare): c.line for c in stated_checks(program, language)}
    found = []
    for check, outcome in zip(stated.items, outcomes.outcomes):
        line = lines.get((check.expression, check.expected, check.compare))
        if line is None or outcome.status == PASSED:
            continue
        stated_value = "true" if check.compare == TRUTHY else check.expected
        found.append(
            {
                "kind": FAILS_OWN_CHECK,
                "symbol": None,
                "line": max(line - first_line + 1, 1),
                "column": 0,
                "message": f"its own example states {check.expression} == {stated_value}, but it gave "
                f"{outcome.got or outcome.status}",
                "severity": "warning",
            }
        )
    return found


def shown(answer: str, findings: list[dict], request_text: str, language: str) -> tuple[str, str | None, list[dict]]:
    """An answer's code as shown, its example usage apart (or None) and its findings placed in one or the other."""
    code, usage = shown_code(answer, request_text, language)
    return code, usage, findings_in_usage(findings, answer, usage) if usage else findings


USAGE = "example_usage"  # a finding's `in` where its line is one of the example usage's, not the code's


def findings_in_usage(findings: list[dict], answer: str, usage: str) -> list[dict]:
    """The findings of a whole answer, those on its example usage's lines numbered from the usage's first line and
    marked `"in": "example_usage"` (the shown code is the answer up to there)."""
    first = answer.count("\n", 0, answer.index(usage.rstrip("\n"))) + 1  # the answer's line where the usage begins
    return [f | {"line": f["line"] - first + 1, "in": USAGE} if f.get("line", 0) >= first else f for f in findings]
