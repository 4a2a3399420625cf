"""Empty implementations: a completion that adds nothing that runs is an error, whatever else it looks like."""

import pytest

from static_eval import AnalyzerSettings, StaticAnalyzer

PROMPT = 'def area(width, height):\n    """Area of a rectangle."""\n'


@pytest.fixture(scope="module")
def analyzer():
    with StaticAnalyzer(AnalyzerSettings(lint=False)) as built:
        yield built


def report_for(analyzer, completion, prompt=PROMPT):
    return analyzer.analyze(prompt, [completion], [False])[0]


@pytest.mark.parametrize(
    "completion",
    [
        "",
        "\n\n",
        "    pass\n",
        "    ...\n",
        "    # TODO: write this\n",
        '    """More documentation."""\n',
        "    raise NotImplementedError\n",
        '    raise NotImplementedError("later")\n',
        "    # step one\n    pass\n    ...\n",
        "    def helper():\n        pass\n    pass\n",
    ],
)
def test_empty_completion_is_an_error(analyzer, completion):
    report = report_for(analyzer, completion)
    assert report.kinds == ["empty-implementation"]
    assert report.errors[0].symbol == "area"


def test_stub_left_empty_while_other_code_is_added_is_an_error(analyzer):
    completion = '    pass\n\n\nif __name__ == "__main__":\n    print(area(2, 3))\n'
    assert "empty-implementation" in report_for(analyzer, completion).kinds


def test_prompt_header_without_body_left_empty_is_an_error(analyzer):
    assert "empty-implementation" in report_for(analyzer, "    pass\n", prompt="def area(width, height):\n").kinds


@pytest.mark.parametrize(
    "completion",
    [
        "    return width * height\n",
        "    return None\n",
        "    raise ValueError('no area')\n",
        "    # multiply\n    result = width * height\n    return result\n",
        "    def helper(a, b):\n        return a * b\n    return helper(width, height)\n",
    ],
)
def test_code_that_runs_is_not_empty(analyzer, completion):
    assert "empty-implementation" not in report_for(analyzer, completion).kinds


def test_module_level_completion_after_an_implemented_function_is_not_empty(analyzer):
    prompt = "def area(width, height):\n    return width * height\n"
    assert "empty-implementation" not in report_for(analyzer, "\n\nSQUARE = area(2, 2)\n", prompt).kinds


def test_completion_finishing_a_prompt_line_is_not_empty(analyzer):
    prompt = PROMPT + "    return "
    assert report_for(analyzer, "width * height\n", prompt).kinds == []
