"""MBPP+ judging: a test in the OriginFmt's shape (numpy's helper, then inputs and the reference's results) runs in the
real sandbox without numpy; right, close-enough and wrong candidates are told apart."""

import json

import pytest

from benchmarks import mbpp_plus, mbpp_plus_build
from benchmarks.sandbox import SandboxSettings
from checks.sandbox import SandboxLimits

# The shape of MbppPlus-OriginFmt's `test` field (v0.2.0): numpy's tolerance helper, then every input with its value.
TEST = """import numpy as np
from math import inf

def is_floats(x) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)):
        return all(isinstance(i, float) for i in x)
    if isinstance(x, np.ndarray):
        return x.dtype == np.float64 or x.dtype == np.float32
    return False


def assertion(out, exp, atol):
    if atol == 0 and is_floats(exp):
        atol = 1e-6
    if out != exp and atol != 0:
        assert np.allclose(out, exp, rtol=1e-07, atol=atol)
    else:
        assert out == exp, f"out: {out}, exp: {exp}"


inputs = [[3], [0], [10]]
results = [[1.5, 4.5], [0.0, 0.0], [5.0, 15.0]]
for i, (inp, exp) in enumerate(zip(inputs, results)):
    assertion(halves(*inp), exp, 0)
"""


def test_a_plus_test_runs_without_numpy_and_tells_right_close_and_wrong_apart(tmp_path):
    path = tmp_path / "plus.jsonl"
    path.write_text(json.dumps({"task_id": 7, "test": TEST}) + "\n")
    tests = mbpp_plus.plus_tests(path)
    assert "import numpy" not in tests[7]
    right = "def halves(n):\n    return [n / 2, 3 * n / 2]\n"
    close = "def halves(n):\n    return [n / 2 + 1e-9, 1.5 * n]\n"
    wrong = "def halves(n):\n    return [n // 2, 3 * n // 2]\n"  # ints: 1 != 1.5
    verdicts = mbpp_plus.judge_plus({7: [right, close, wrong], 8: [right]}, tests, SandboxSettings(timeout_s=20))
    assert verdicts == {7: [True, True, False]}  # task 8 is not in MBPP+: not judged


def test_a_test_that_uses_more_of_numpy_than_the_helper_is_refused():
    with pytest.raises(ValueError, match="beyond the known helper"):
        mbpp_plus.without_numpy(TEST + "x = np.array([1])\n")


def test_rescoring_reads_bench_words_lines_over_the_tasks_mbpp_plus_has():
    right = "def halves(n):\n    return [n / 2, 3 * n / 2]\n"
    wrong = "def halves(n):\n    return [n, n]\n"
    answers = {
        "ours_ranked": {
            7: {"passed": True, "code": wrong, "candidates": [{"code": wrong}, {"code": right}]},
            9: {"passed": False, "code": wrong},  # not in MBPP+: left out
        },
        "ours_greedy": {7: {"passed": False, "code": right}},
    }
    rows = mbpp_plus.rescore(answers, {7: mbpp_plus.without_numpy(TEST)}, SandboxSettings(timeout_s=20))
    assert rows["ours_ranked"] == {"n_tasks": 1, "pass@first": 100.0, "pass@first+": 0.0, "pass@all+": 100.0}
    assert rows["ours_greedy"] == {"n_tasks": 1, "pass@first": 0.0, "pass@first+": 100.0}


def evalplus_task(number: int, entry_point: str, solution: str, inputs: list, atol: float = 0) -> dict:
    """A task in EvalPlus's own MbppPlus.jsonl shape (inputs as JSON has them: tuples written as lists)."""
    return {
        "task_id": f"Mbpp/{number}",
        "entry_point": entry_point,
        "canonical_solution": solution,
        "base_input": inputs[:1],
        "plus_input": inputs[1:],
        "atol": atol,
    }


def test_json_inputs_get_back_the_types_the_reference_expects():
    assert mbpp_plus_build.task_args(2, [[1, 2], [3]]) == [(1, 2), (3,)]  # every argument a tuple
    assert mbpp_plus_build.task_args(124, [1, "(1+2j)"]) == [1.0, 1 + 2j]
    assert mbpp_plus_build.task_args(580, [[1, [2, [3]]]]) == [(1, (2, (3,)))]
    assert mbpp_plus_build.task_args(9, [[1, 2]]) == [[1, 2]]  # a task not in the table: as JSON has it
    task = evalplus_task(2, "f", "", [[[1], [2]], [[1], [2]], [[2], [1]]])
    assert mbpp_plus_build.distinct_inputs(2, task) == [[(1,), (2,)], [(2,), (1,)]]


def test_built_tests_hold_the_references_results_and_tell_right_from_wrong():
    tasks = [
        # MBPP+ compares this one's results as sets (EvalPlus's special oracle), its arguments tuples
        evalplus_task(
            2,
            "similar_elements",
            "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
            [[[3, 4, 5], [5, 4, 9]], [[1], [2]]],
        ),
        # a Counter is no literal: the test runs the reference beside the candidate
        evalplus_task(
            88,
            "freq_count",
            "import collections\ndef freq_count(xs):\n    return collections.Counter(xs)\n",
            [[[1, 1, 2]], [[]]],
        ),
        evalplus_task(7, "halves", "def halves(n):\n    return [n / 2, 3 * n / 2]\n", [[3], [0], [1e9]], atol=1e-4),
        evalplus_task(9, "broken", "def broken(n):\n    return 1 // n\n", [[1], [0]]),  # its reference raises
        evalplus_task(83, "removed", "def removed():\n    return 1\n", [[]]),  # one of v0.2.0's 21 removed tasks
    ]
    limits = SandboxLimits(wall_s=20, cpu_s=20, memory_mb=1024)
    rows, failed = mbpp_plus_build.build(tasks, limits, SandboxSettings(timeout_s=20))
    assert sorted(row["task_id"] for row in rows) == [2, 7, 88] and list(failed) == [9]
    tests = {row["task_id"]: mbpp_plus.without_numpy(row["test"]) for row in rows}
    assert "results = [" in tests[7] and "_reference" in tests[88]
    codes = {
        2: [
            "def similar_elements(a, b):\n    return [x for x in b if x in a]\n",  # other order, a list: right
            "def similar_elements(a, b):\n    return tuple(a)\n",
        ],
        88: [
            "def freq_count(xs):\n    d = {}\n    for x in xs:\n        d[x] = d.get(x, 0) + 1\n    return d\n",
            "def freq_count(xs):\n    return {x: 1 for x in xs}\n",
        ],
        7: [
            "def halves(n):\n    return [n * 0.5, n * 1.5 + 1e-6]\n",  # within the task's atol
            "def halves(n):\n    return [n // 2, 3 * n // 2]\n",
        ],
    }
    assert mbpp_plus.judge_plus(codes, tests, SandboxSettings(timeout_s=20)) == {t: [True, False] for t in codes}
