"""The settled rule (app/settled.py): a k-row request stops its growing rows once the greedy row has ended and two
rows that ended pass every check (a request in words without a check: once more than half of the rows ended);
checked with a source that grows its rows step by step as the engine does (each step heard through on_update,
should_stop asked before the next) and the real sandbox."""

from __future__ import annotations

import time

from app.requests import Limits, build_checks, build_request
from app.service import Pipeline
from engine import Candidate, GenerationResult, GenerationStats
from engine.types import FINISH_BUDGET, FINISH_STOP

PROMPT = 'def add(a, b):\n    """Add two numbers.\n    >>> add(2, 3)\n    5\n    """\n'
RIGHT, ALSO_RIGHT, WRONG = "    return a + b\n", "    return b + a\n", "    return a - b\n"
LONG = ["    total = a\n"] + ["    total += 0\n"] * 10 + ["    return total + b\n"]  # ends at its 12th step
LONG_ANSWER = ["```python\ndef add(a, b):\n", *LONG, "```\n"]  # the long row, as an answer in words
STEP_S = 0.2  # a step's seconds: the sandbox's verdicts come back on the watcher's thread meanwhile


class Growing:
    """Rows that end at the step given (row i ends after steps[i] steps, its text whole then), a step every STEP_S;
    the rows still growing at a step that should_stop answers True for end there, unfinished ("budget"), as the
    engine's do."""

    def __init__(self, texts: list[str], steps: list[int], long: list[str] = LONG):
        self.texts, self.steps, self.long, self.ran = texts, steps, long, 0

    def generate(self, request, on_update=None, should_stop=None):
        finish = [None] * len(self.texts)
        for step in range(1, max(self.steps) + 1):
            if should_stop is not None and should_stop():
                break
            time.sleep(STEP_S)
            self.ran = step
            finish = [FINISH_STOP if step >= n else None for n in self.steps]
            if on_update is not None:
                on_update(self._result(finish, step))
        return self._result([f or FINISH_BUDGET for f in finish], self.ran)

    def _result(self, finish, step) -> GenerationResult:
        rows = [Candidate(self._text(text, f, step), [1], [-0.1], f) for text, f in zip(self.texts, finish)]
        return GenerationResult(rows, GenerationStats(wall_s=0.1 * step))

    def _text(self, text: str, finish: str | None, step: int) -> str:
        """A row's text: whole where it ended by itself (or at its limit), else as far as it grew (stopped too)."""
        if finish not in (None, FINISH_BUDGET):
            return text
        return "".join(self.long[:step]) if text == "LONG" else text[: 4 * step]


def _request(k: int):
    return build_request(PROMPT, k=k, budget_s=20.0, temperature=0.8, max_new_tokens=32, seed=1, limits=Limits(max_k=8))


def test_two_passing_rows_and_the_greedy_one_ended_stop_the_row_still_growing(checker):
    source = Growing([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 12])
    result = Pipeline(checker=checker).run(source, _request(3), checks=build_checks())
    assert 2 <= source.ran < 12  # the long row's last steps were not taken
    assert [c.finish_reason for c in sorted(result.candidates, key=lambda c: c.indices[0])] == [
        "stop",
        "stop",
        "budget",
    ]
    assert "settled: 2 finished rows passed every check, so the 1 row still growing was stopped there" in result.notes


def test_answers_in_words_settle_on_the_asserts_the_request_carries(checker):
    """A request in words with its assert: the answers' code blocks are what runs; two that pass and the greedy one
    ended stop the answer still growing."""
    words = "Write a Python function add(a, b) that adds two numbers.\nassert add(2, 3) == 5"
    source = Growing([_fenced(RIGHT), _fenced(ALSO_RIGHT), "LONG"], [1, 2, 12], LONG_ANSWER)
    result = Pipeline(checker=checker).run(source, _words(words), checks=build_checks())
    assert 2 <= source.ran < 12
    assert "settled: 2 finished rows passed every check, so the 1 row still growing was stopped there" in result.notes


WORDS = "Write a Python function add(a, b) that adds two numbers."  # no check to settle on


def test_answers_in_words_without_a_check_stop_once_more_than_half_of_the_rows_ended(checker):
    """The majority rule: the greedy row and 2 of 3 rows ended stop the third; 2 of 4 are not more than half."""
    source = Growing([_fenced(RIGHT), _fenced(WRONG), "LONG"], [1, 2, 12], LONG_ANSWER)
    result = Pipeline(checker=checker).run(source, _words(WORDS), checks=build_checks())
    assert source.ran == 2
    assert [c.finish_reason for c in sorted(result.candidates, key=lambda c: c.indices[0])] == [
        "stop",
        "stop",
        "budget",
    ]
    expected = "settled: 2 of 3 rows had ended and the request carries no check, so the 1 row still growing was"
    assert any(note.startswith(expected) for note in result.notes)
    assert [(c.finish_reason, c.score_parts["ended"]) for c in result.candidates][-1] == ("budget", 0.0)
    assert all(c.score_parts["ended"] == 1.0 for c in result.candidates[:-1])
    source = Growing([_fenced(RIGHT), _fenced(WRONG), "LONG", "LONG"], [1, 2, 12, 12], LONG_ANSWER)
    Pipeline(checker=checker).run(source, _words(WORDS, k=4), checks=build_checks())
    assert source.ran == 12


STATING = ["```python\ndef add(a, b):\n", "    return a + b\n", "\n", "print(add(1, 2))  # Output: 3\n"]
STATING += ["print(add(2, 2))  # Output: 4\n"] * 8 + ["```\n"]  # a right answer stating its examples, at length


def test_where_the_majority_rule_stopped_rows_the_rows_that_ended_rank_first(checker):
    """Two stopped copies of a right answer pass the examples they state and the ended (wrong) rows do not, so the
    stated checks alone would rank the stopped rows first; the rows that ended rank before them (the rule's premise:
    the answer is among them; a client reads a stopped row as cut short)."""
    texts = [_fenced(WRONG), _fenced("    return b - a\n"), _fenced("    return a * b\n"), "LONG", "LONG"]
    source = Growing(texts, [5, 6, 7, 12, 12], STATING)
    result = Pipeline(checker=checker).run(source, _words(WORDS, k=5), checks=build_checks())
    assert source.ran == 7
    assert [c.finish_reason for c in result.candidates] == ["stop", "stop", "stop", "budget"]
    assert [c.score_parts["ended"] for c in result.candidates] == [1.0, 1.0, 1.0, 0.0]
    assert result.candidates[-1].score_parts["stated_agreement"] > result.candidates[0].score_parts["stated_agreement"]


def test_the_majority_rule_waits_for_the_greedy_row_and_leaves_code_and_the_rule_off_alone(checker):
    answers = [_fenced(RIGHT), _fenced(WRONG), "LONG"]
    source = Growing(["LONG", *answers[:2]], [12, 1, 2], LONG_ANSWER)  # row 0, the greedy one, is the long one
    Pipeline(checker=checker).run(source, _words(WORDS), checks=build_checks())
    assert source.ran == 12
    source = Growing(answers, [1, 2, 12], LONG_ANSWER)
    result = Pipeline(checker=checker, settle=False).run(source, _words(WORDS), checks=build_checks())
    assert source.ran == 12 and all(c.score_parts["ended"] is None for c in result.candidates)
    source = Growing([RIGHT, WRONG, "LONG"], [1, 2, 12])  # code without an example: not measured, not cut
    code = build_request("def add(a, b):\n", k=3, budget_s=20.0, temperature=0.8, max_new_tokens=32, seed=1)
    Pipeline(checker=checker).run(source, code, checks=build_checks())
    assert source.ran == 12


def _fenced(body: str) -> str:
    return "```python\ndef add(a, b):\n" + body + "```\n"


def _words(text: str, k: int = 3):
    return build_request(text, k=k, budget_s=20.0, temperature=0.8, max_new_tokens=32, seed=1, mode="words")


def test_rows_that_fail_the_examples_settle_nothing(checker):
    source = Growing([WRONG, WRONG.replace("a - b", "b - a"), "LONG"], [1, 2, 12])
    result = Pipeline(checker=checker).run(source, _request(3), checks=build_checks())
    assert source.ran == 12 and not any(n.startswith("settled") for n in result.notes)


def test_without_checks_or_with_the_rule_off_every_row_runs_to_its_end(checker):
    source = Growing([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 12])
    Pipeline(checker=checker, settle=False).run(source, _request(3), checks=build_checks())
    assert source.ran == 12
    source = Growing([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 12])
    Pipeline(checker=checker).run(source, _request(3), checks=build_checks(run=False))
    assert source.ran == 12


def test_a_failure_of_the_sandbox_while_rows_grow_lets_them_grow_and_the_run_goes_on(checker):
    """The rule is a help to the request: checks that cannot run leave every row to its own end (logged)."""

    class Broken:
        def __init__(self, runner):
            self.runner, self.calls = runner, 0

        def __getattr__(self, name):
            return getattr(self.runner, name)

        def run(self, programs, checks, language=None):
            self.calls += 1
            if self.calls == 1:  # the watcher's first run
                raise OSError("bwrap: cannot start")
            return self.runner.run(programs, checks, language)

    source = Growing([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 12])
    result = Pipeline(checker=Broken(checker)).run(source, _request(3), checks=build_checks())
    assert source.ran == 12 and result.candidates[0].code in (RIGHT, ALSO_RIGHT)


def test_while_the_greedy_row_grows_nothing_stops_and_a_row_cut_by_its_limit_does_not_count(checker):
    """Row 0 (greedy) is the long one: two passing rows do not stop it. A passing text that ended at its token limit
    ("length") is not a finished row."""
    source = Growing(["LONG", RIGHT, ALSO_RIGHT], [12, 1, 2])
    Pipeline(checker=checker).run(source, _request(3), checks=build_checks())
    assert source.ran == 12

    class Limited(Growing):
        def _result(self, finish, step):
            result = super()._result(finish, step)
            row = result.candidates[1]  # ALSO_RIGHT's text, but cut by its limit
            row.finish_reason = "length" if row.finish_reason else None
            return result

    source = Limited([RIGHT, ALSO_RIGHT, "LONG"], [1, 2, 12])
    Pipeline(checker=checker).run(source, _request(3), checks=build_checks())
    assert source.ran == 12


def test_the_rule_is_on_by_default_and_the_command_line_turns_it_off(entry_point):
    assert entry_point.parse_args([]).no_settle is False
    assert entry_point.parse_args(["--no-settle"]).no_settle is True
