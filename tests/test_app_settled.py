"""The settled rule (app/settled.py): a k-row request stops its growing rows once the greedy row has ended and two
rows that ended pass every check; checked with a source that grows its rows step by step as the engine does (each
step heard through on_update, should_stop asked before the next) and the real sandbox."""

from __future__ import annotations

from app.requests import Limits, build_checks, build_request
from app.service import Pipeline
from engine import Candidate, GenerationResult, GenerationStats
from engine.types import FINISH_BUDGET, FINISH_STOP

PROMPT = 'def add(a, b):\n    """Add two numbers.\n    >>> add(2, 3)\n    5\n    """\n'
RIGHT, ALSO_RIGHT, WRONG = "    return a + b\n", "    return b + a\n", "    return a - b\n"
LONG = ["    total = a\n", "    total += b\n", "    total += 0\n", "    return total\n"]  # ends at its 4th step


class Growing:
    """Rows that end at the step given (row i ends after steps[i] steps, its text whole then); the rows still growing
    at a step that should_stop answers True for end there, unfinished ("budget"), as the engine's do."""

    def __init__(self, texts: list[str], steps: list[int]):
        self.texts, self.steps, self.ran = texts, steps, 0

    def generate(self, request, on_update=None, should_stop=None):
        finish = [None] * len(self.texts)
        for step in range(1, max(self.steps) + 1):
            if should_stop is not None and should_stop():
                break
            self.ran = step
            finish = [FINISH_STOP if step >= n else None for n in self.steps]
            if on_update is not None:
                on_update(self._result(finish, step))
        return self._result([f or FINISH_BUDGET for f in finish], self.ran)

    def _result(self, finish, step) -> GenerationResult:
        rows = [
            Candidate(text if f else "".join(LONG[:step]) if text == "LONG" else text[: 4 * step], [1], [-0.1], f)
            for text, f in zip(self.texts, finish)
        ]
        return GenerationResult(rows, GenerationStats(wall_s=0.1 * step))


def _request(k: int):
    return build_request(PROMPT, k=k, budget_s=20.0, temperature=0.8, max_new_tokens=32, seed=1, limits=Limits(max_k=8))


def test_two_passing_rows_and_the_greedy_one_ended_stop_the_row_still_growing(checker):
    source = Growing([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 4])
    result = Pipeline(checker=checker).run(source, _request(3), checks=build_checks())
    assert source.ran == 2  # the long row's last two steps were not taken
    assert [c.finish_reason for c in sorted(result.candidates, key=lambda c: c.indices[0])] == [
        "stop",
        "stop",
        "budget",
    ]
    assert any(n.startswith("settled: 2 finished candidates passed every check") for n in result.notes)


def test_rows_that_fail_the_examples_settle_nothing(checker):
    source = Growing([WRONG, WRONG.replace("a - b", "b - a"), "LONG"], [1, 2, 4])
    result = Pipeline(checker=checker).run(source, _request(3), checks=build_checks())
    assert source.ran == 4 and not any(n.startswith("settled") for n in result.notes)


def test_without_checks_or_with_the_rule_off_every_row_runs_to_its_end(checker):
    source = Growing([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 4])
    Pipeline(checker=checker, settle=False).run(source, _request(3), checks=build_checks())
    assert source.ran == 4
    source = Growing([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 4])
    Pipeline(checker=checker).run(source, _request(3), checks=build_checks(run=False))
    assert source.ran == 4
