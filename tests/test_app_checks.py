"""The pipeline with checks: the prompt's examples and the user's asserts run on every candidate, the ranking puts
the candidates that pass first, the result says what each check gave, and nothing runs when checks are off."""

from __future__ import annotations

import pytest

from app.requests import CheckRequest, Limits, build_checks, build_request
from app.service import Pipeline
from checks import CheckRunner
from engine import Candidate, GenerationResult, GenerationStats, InvalidRequest
from engine.types import FINISH_STOP

PROMPT = 'def add(a, b):\n    """Add two numbers.\n    >>> add(2, 3)\n    5\n    """\n'
WRONG, RIGHT = "    return a * b + 0\n", "    return a + b\n"


class Replay:
    """A candidate source that answers every request with the same texts (as a server replaying a recording)."""

    def __init__(self, texts: list[str]):
        self.texts = texts

    def generate(self, request, on_update=None, should_stop=None):
        return GenerationResult(
            [Candidate(text, [1] * 3, [-0.1] * 3, FINISH_STOP) for text in self.texts], GenerationStats()
        )


def _request():
    return build_request(PROMPT, k=3, budget_s=5.0, temperature=0.8, max_new_tokens=16, limits=Limits(max_k=8))


def test_the_candidate_that_passes_the_examples_ranks_first(checker):
    source = Replay([WRONG, WRONG.replace("+ 0", "+ 0 "), RIGHT])  # the two wrong ones agree with each other
    without = Pipeline(checker=None).run(source, _request())
    assert without.candidates[0].code != RIGHT
    result = Pipeline(checker=checker).run(source, _request())
    first = result.candidates[0]
    assert first.code == RIGHT and first.score_parts["checks_passed"] == 1
    assert first.as_dict()["checks"]["outcomes"] == [{"status": "passed", "got": "5"}]
    assert result.candidates[1].as_dict()["checks"]["outcomes"] == [{"status": "failed", "got": "6"}]
    assert result.checks.ran and result.as_dict()["checks"]["items"][0]["label"] == "add(2, 3) == 5"
    assert result.checks.items[0].line == 3
    assert result.timings.checks_s > 0


def test_user_checks_join_the_examples(checker):
    asked = build_checks("assert add(10, 5) == 15\nassert add(-1, -1) == -2")
    result = Pipeline(checker=checker).run(Replay([RIGHT, WRONG]), _request(), checks=asked)
    assert [i.origin for i in result.checks.items] == ["doctest", "assert", "assert"]
    assert result.candidates[0].checks.passed == 3


def test_checks_off_runs_nothing_and_says_so(checker):
    result = Pipeline(checker=checker).run(Replay([WRONG, RIGHT]), _request(), checks=CheckRequest(run=False))
    assert not result.checks.ran and result.candidates[0].checks is None
    assert any("not run" in note for note in result.notes)
    off = Pipeline(checker=None).run(Replay([WRONG, RIGHT]), _request())
    assert not off.checks.available and "--no-run-checks" in off.checks.reason


def test_an_unavailable_sandbox_is_reported_not_bypassed():
    runner = CheckRunner(None, "checks are not run: the sandbox is not available here (no user namespaces)")
    result = Pipeline(checker=runner).run(Replay([WRONG, RIGHT]), _request())
    assert not result.checks.ran and "no user namespaces" in " ".join(result.notes)


def test_a_bad_check_line_is_named():
    with pytest.raises(InvalidRequest, match=r"check line 1 \('assert add\(1,'\)"):
        build_checks("assert add(1,")
    with pytest.raises(InvalidRequest, match="run_checks='yes' is invalid"):
        build_checks("", "yes")


JS_PROMPT = (
    '//Return length of given string\n// >>> strlen("")\n// 0\n// >>> strlen("abc")\n// 3\nfunction strlen(string){\n'
)
JS_WRONG, JS_RIGHT = "  return string.length + 1;\n}\n", "  return string.length;\n}\n"


def test_a_javascript_prompts_examples_run_under_node_and_the_passing_candidate_ranks_first(checker):
    if checker.reason_for("javascript") is not None:
        pytest.skip(checker.reason_for("javascript"))
    made = build_request(JS_PROMPT, k=3, budget_s=5.0, temperature=0.8, max_new_tokens=16, limits=Limits(max_k=8))
    assert made.language.name == "javascript"
    asked = build_checks('assert.deepStrictEqual(strlen("ab"), 2)', language=made.language)
    result = Pipeline(checker=checker).run(Replay([JS_WRONG, JS_WRONG, JS_RIGHT]), made, checks=asked)
    assert result.checks.ran and [c.origin for c in result.checks.items][-1] == "assert"
    assert result.candidates[0].code == JS_RIGHT and result.candidates[0].checks.passed == 3
    assert [o.got for o in result.candidates[1].checks.outcomes] == ["1", "4", "3"]  # what the wrong one gave
