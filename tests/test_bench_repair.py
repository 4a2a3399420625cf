"""Repair from what failed (benchmarks/repair.py, measured by eval_repair): the request shows the candidate and its
failing checks, and an answer is read back as a continuation of the user's prompt that runs."""

import pytest

from benchmarks.repair import RepairSettings, body_indent, continuation, failure_lines, repair_request, repair_target
from checks import Check
from checks.check import TRUTHY
from checks.runner import ERROR, FAILED, PASSED, TIMEOUT, CandidateChecks, CheckOutcome
from engine import GenerationRequest

PROMPT = 'def add(a, b):\n    """Add two numbers.\n    >>> add(1, 2)\n    3\n    """\n'
CHECKS = [Check(3, "add(1, 2)", "3"), Check(4, "add(2, 2)", "4"), Check(5, "add(0, 0) == 0", "", compare=TRUTHY)]


def outcome(*pairs) -> CandidateChecks:
    return CandidateChecks(tuple(CheckOutcome(status, got) for status, got in pairs))


def test_failure_lines_quote_the_call_the_value_wanted_and_what_came_back():
    lines = failure_lines(CHECKS, outcome((FAILED, "-1"), (PASSED, ""), (ERROR, "TypeError: nope")))
    assert lines == [
        "- `add(1, 2)` should return `3`, but it gave `-1`.",
        "- `assert add(0, 0) == 0` should hold, but it raised TypeError: nope.",
    ]


def test_failure_lines_stop_at_the_limit_and_cut_long_values():
    long = "x" * 500
    lines = failure_lines(CHECKS, outcome((FAILED, long), (TIMEOUT, ""), (FAILED, "1")), RepairSettings(1, 50))
    assert len(lines) == 1 and len(lines[0]) < 120 and lines[0].endswith("...`.")


def test_repair_request_is_a_conversation_that_shows_the_candidate_and_its_failures():
    request = GenerationRequest(PROMPT, k=4, temperature=0.8, stop=("\nif",))
    asked = repair_request(
        request, "    return a - b\n", "add", CHECKS, outcome((FAILED, "-1"), (PASSED, ""), (PASSED, ""))
    )
    assert asked.in_words and [t.role for t in asked.turns] == ["user", "assistant", "user"]
    assert "return a - b" in asked.turns[1].content and "`add(1, 2)` should return `3`" in asked.turns[2].content
    assert asked.k == 4 and asked.stop == () and not asked.stop_at_body_end
    asked.validate()


def test_no_repair_for_a_candidate_that_passes_everything():
    request = GenerationRequest(PROMPT)
    assert repair_request(request, "    return a + b\n", "add", CHECKS, outcome(*[(PASSED, "")] * 3)) is None


ANSWER = """The bug is the minus sign. Here is the fix:

```python
import math

def add(a, b):
    \"\"\"Add two numbers.\"\"\"
    return _plus(a, b)

def _plus(x, y):
    return x + y

print(add(1, 2))
assert add(2, 2) == 4
```
"""


def test_an_answer_becomes_a_continuation_with_its_helpers_and_without_its_tests():
    text = continuation(PROMPT, ANSWER, "add")
    assert text.startswith("    return _plus(a, b)\n") and "def _plus" in text and "import math" in text
    assert "print(" not in text and "assert" not in text
    namespace = {}
    exec(compile(PROMPT + text, "<candidate>", "exec"), namespace)  # the test's own text, not a model's
    assert namespace["add"](2, 5) == 7


def test_an_answer_indented_otherwise_takes_the_prompt_s_indentation():
    text = continuation(PROMPT, "```python\ndef add(a, b):\n  if a:\n    return a + b\n  return b\n```", "add")
    namespace = {}
    exec(compile(PROMPT + text, "<candidate>", "exec"), namespace)
    assert namespace["add"](1, 2) == 3 and namespace["add"](0, 2) == 2


@pytest.mark.parametrize(
    "answer",
    [
        "```python\ndef other(a):\n    return a\n```",
        "```python\ndef add(a, b)\n    return a\n```",
        "no code at all",
        '```python\ndef add(a, b):\n    """Only a docstring."""\n```',
    ],
)
def test_answers_without_the_function_read_as_none(answer):
    assert continuation(PROMPT, answer, "add") is None


def test_body_indent_only_where_the_prompt_ends_before_the_body():
    assert body_indent(PROMPT) == "    "
    assert body_indent("def f(x):\n\t'''Doc.'''\n") == "\t"
    assert body_indent(PROMPT + "    total = a\n") is None
    assert body_indent("x = 1\n") is None
    assert continuation(PROMPT + "    total = a\n", ANSWER, "add") is None


def test_settings_name_the_bad_value():
    with pytest.raises(ValueError, match="failures_shown=0"):
        RepairSettings(failures_shown=0)


def test_the_target_is_the_best_ranked_failing_candidate_not_repaired_yet():
    texts = ["    return a - b\n", "    return a * b\n", "    return a - b\n", "    return a + b\n", "   \n"]
    passed = [1, 0, 1, 2, 0]
    assert repair_target(texts, passed, 2, set()) == 0  # one check passed beats none; the right one is not repaired
    assert repair_target(texts, passed, 2, {texts[0]}) == 1
    assert repair_target(texts, passed, 2, {texts[0], texts[1]}) is None  # the blank one has nothing to repair


def test_repair_rounds_every_and_the_fix_asks_for_room_and_a_greedy_row():
    assert [RepairSettings(every=1).repairs(r) for r in (1, 2, 3)] == [True, True, True]
    assert [RepairSettings(every=2).repairs(r) for r in (1, 2, 3, 4)] == [True, False, True, False]
    request = GenerationRequest(PROMPT, k=4, temperature=0.8, max_new_tokens=100)
    asked = repair_request(
        request, "    return a - b\n", "add", CHECKS, outcome((FAILED, "-1"), (PASSED, ""), (PASSED, ""))
    )
    assert asked.greedy_first and asked.max_new_tokens == 200


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        ("```python\ndef add(a, b): return a + b\n```", True),  # the body on the def's line
        ("```python\ndef add(a, b):\n\treturn a + b\n```", True),  # tabs
        ("```python\nLIMIT = 10\nTOTAL: int = 0\nr = add(1, 2)\n\ndef add(a, b):\n    return a + b + TOTAL\n```", True),
        ("```python\nfrom functools import lru_cache\n@lru_cache\ndef add(a, b):\n    return a + b\n```", None),
        ("```python\ndef add(x, y):\n    return x + y\n```", None),  # other parameter names: not the same body
    ],
)
def test_answers_of_every_shape_read_back_as_running_continuations_or_none(answer, right):
    text = continuation(PROMPT, answer, "add")
    if right is None:
        assert text is None
        return
    assert "r = add" not in text  # a call at the top level is a test, not part of the fix
    namespace = {}
    exec(compile(PROMPT + text, "<candidate>", "exec"), namespace)  # the test's own text, not a model's
    assert namespace["add"](2, 5) == 7


def test_a_helper_the_prompt_defines_is_not_replaced_and_odd_prompts_are_not_repaired():
    prompt = "def helper(x):\n    return x\n\n\n" + PROMPT
    answer = "```python\ndef helper(x):\n    return 0\n\ndef add(a, b):\n    return helper(a) + b\n```"
    assert "def helper" not in continuation(prompt, answer, "add")
    assert body_indent("def f(x):\n    '''Doc.\n        indented more\n    '''\n") == "    "
    assert body_indent("def f(x):\n    return 1\0\n") is None  # a NUL byte: no parse, no repair, no crash
    assert continuation("def f(x):\0\n", "```python\ndef f(x):\n    return 1\n```", "f") is None
