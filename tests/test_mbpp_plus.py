"""MBPP+ judging: a test in the OriginFmt's shape (numpy's helper, then inputs and the reference's results) runs in the
real sandbox without numpy; right, close-enough and wrong candidates are told apart."""

import json

import pytest

from benchmarks import mbpp_plus
from benchmarks.sandbox import SandboxSettings

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
