"""Lint findings (pylint in the warm worker), diffed against the prompt alone by message and symbol."""

import pytest

from static_eval import StaticAnalyzer

PROMPT = 'def solve(numbers, k):\n    """Return something of numbers and k."""\n'


@pytest.fixture(scope="module")
def analyzer():
    with StaticAnalyzer() as built:
        yield built


def kinds(analyzer, completion, prompt=PROMPT):
    return analyzer.analyze(prompt, [completion], [False])[0].kinds


def test_correct_completion_has_no_findings(analyzer):
    assert kinds(analyzer, "    return sum(numbers) + k\n") == []


@pytest.mark.parametrize(
    "completion, kind",
    [
        ("    return sum(numbrs) + k\n", "undefined-variable"),
        ("    total = 0\n    return sum(numbers) + k\n", "unused-variable"),
        ("    import os\n    return sum(numbers) + k\n", "unused-import"),
        ("    print(total)\n    total = 1\n    return sum(numbers) + k + total\n", "used-before-assignment"),
        ("    return k\n    print(numbers)\n", "unreachable"),
        ("    numbers\n    return k\n", "pointless-statement"),
        ("    first, second = (1, 2, 3)\n    return numbers, k, first, second\n", "unbalanced-tuple-unpacking"),
        ("    return k(numbers) if False else 1()\n", "not-callable"),
        ("    return solve(numbers)\n", "no-value-for-parameter"),
        ("    return solve(numbers, k, 3)\n", "too-many-function-args"),
        ("    return sum(numbers) + k\n\n\ndef helper(solve):\n    return solve\n", "redefined-outer-name"),
        ("    return sum(numbers) + k\n\n\nreturn 3\n", "return-outside-function"),
    ],
)
def test_lint_kind_is_found(analyzer, completion, kind):
    assert kind in kinds(analyzer, completion)


def test_severity_and_symbol(analyzer):
    report = analyzer.analyze(PROMPT, ["    total = 0\n    return sum(numbrs) + k\n"])[0]
    by_kind = {f.kind: f for f in report.findings}
    assert by_kind["undefined-variable"].severity == "error"
    assert by_kind["undefined-variable"].symbol == "numbrs"
    assert (by_kind["undefined-variable"].line, by_kind["undefined-variable"].column) == (2, 15)
    assert by_kind["unused-variable"].severity == "warning"
    assert by_kind["unused-variable"].symbol == "total"


def test_prompt_problems_are_not_charged_to_the_candidate(analyzer):
    prompt = "import os\n\nprint(undefined_in_prompt)\n\n\n" + PROMPT
    assert kinds(analyzer, "    return sum(numbers) + k\n", prompt) == []


def test_unused_argument_of_the_prompt_function_is_not_charged(analyzer):
    assert "unused-argument" not in kinds(analyzer, "    return sum(numbers)\n")


def test_new_instance_of_a_prompt_problem_is_charged(analyzer):
    prompt = "import os\n\n\n" + PROMPT
    assert "unused-import" in kinds(analyzer, "    import sys\n    return sum(numbers) + k\n", prompt)


def test_batch_reports_align_with_candidates(analyzer):
    completions = [
        "    return sum(numbers) + k\n",
        "    return sum(numbrs) + k\n",
        "    return (k\n",
        "    return sum(numbers) + k\n",
    ]
    reports = analyzer.analyze(PROMPT, completions)
    assert [r.kinds for r in reports] == [[], ["undefined-variable"], ["syntax-error", "truncated"], []]


def test_indentation_that_tree_sitter_accepts_is_a_syntax_error(analyzer):
    report = analyzer.analyze(PROMPT, ["    total = k\n     return total\n"])[0]
    assert not report.parses
    assert "syntax-error" in report.kinds and "empty-implementation" not in report.kinds


def test_the_prompt_is_linted_once_and_cached(analyzer):
    prompt = 'import os\n\n\ndef f(x):\n    """Doc."""\n'
    first = analyzer.analyze(prompt, ["    return x\n"])[0]
    second = analyzer.analyze(prompt, ["    return x + 1\n"])[0]
    assert first.kinds == second.kinds == []
    assert analyzer._prompts[("python", prompt, "")].baseline is not None  # kept after the first call


MIDDLE_PREFIX = "class Store:\n    def __init__(self, path):\n        self.path = path\n\n    def save(self):\n"
MIDDLE_SUFFIX = (
    "\n    def load(self):\n        return self._read(self.path)\n\n    def _read(self, path):\n        return path\n"
)


def test_a_middle_is_judged_in_place_with_the_code_after_the_cursor(analyzer):
    """A helper defined after the cursor is not an undefined name; a middle that breaks the suffix is found; what
    prefix + suffix alone already have is not blamed on the middle (its empty `save` body, a stub, is not)."""
    uses_helper = "        return _encode(self.path)\n"
    suffix = MIDDLE_SUFFIX + "\n\ndef _encode(text):\n    return text\n"
    assert analyzer.analyze(MIDDLE_PREFIX, [uses_helper], [False], suffix)[0].kinds == []
    assert "undefined-variable" in analyzer.analyze(MIDDLE_PREFIX, [uses_helper], [False])[0].kinds
    reports = analyzer.analyze(
        MIDDLE_PREFIX, ["        pass\n", "        with open(self.path) as f:\n"], [False, False], MIDDLE_SUFFIX
    )
    assert "empty-implementation" in reports[0].kinds  # save() still does nothing
    assert not reports[1].parses and "syntax-error" in reports[1].kinds  # nothing under the `with`
    unused = "import os\n\n\n" + MIDDLE_PREFIX  # the context's own unused import is not new
    assert analyzer.analyze(unused, ["        return self.path\n"], [False], MIDDLE_SUFFIX)[0].kinds == []
