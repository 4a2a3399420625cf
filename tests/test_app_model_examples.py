"""Examples the model reads where the patterns do not (app/model_examples.py): asked only where the docstring calls
its function more often than the patterns read, and kept only where every literal is in the prompt."""

from dataclasses import replace

import pytest

from app.model_examples import ExampleReaderSettings, examples_request, grounded, read_examples, unread_calls
from checks import Check, checks_for_prompt
from engine import Candidate, GenerationRequest, GenerationResult, GenerationStats

# a phrasing the patterns read only in part
UNREAD = 'def square(x):\n    """Square x.\n\n    (for instance square(3) is 9, and square(-2) is 4)\n    """\n'
READ = 'def square(x):\n    """Square x.\n    >>> square(3)\n    9\n    """\n'


ASKED = examples_request(GenerationRequest(UNREAD), "square", ExampleReaderSettings())


def answer(text: str) -> GenerationResult:
    return GenerationResult([Candidate(text, [1], [-0.1], "stop")], GenerationStats())


def test_the_patterns_miss_the_phrasing_and_the_reader_is_asked_only_then():
    found = checks_for_prompt(UNREAD)
    assert [c.label() for c in found] == ["square(3) == 9"]  # the second call of the sentence is missed
    assert unread_calls(UNREAD, "square", found) == 1 and unread_calls(UNREAD, "square", []) == 2
    assert unread_calls(READ, "square", checks_for_prompt(READ)) == 0
    assert unread_calls("def f(x):\n    return x\n", "f", []) == 0


def test_the_request_asks_for_asserts_of_the_prompt_greedily():
    asked = examples_request(
        GenerationRequest(UNREAD, k=6, temperature=0.8, budget_s=20), "square", ExampleReaderSettings()
    )
    assert asked.in_words and asked.k == 1 and asked.temperature == 0.0 and asked.budget_s == 5.0
    assert "square(3) is 9" in asked.turns[0].content and "`assert square(...) == result`" in asked.turns[0].content
    asked.validate()


def test_read_examples_keep_what_the_docstring_states_and_drop_what_the_model_worked_out():
    text = (
        "```python\nassert square(3) == 9\nassert square(-2) == 4\nassert square(5) == 25\n"
        "assert square(3) == 9\nassert other(1) == 1\nprint(square(3))\n```"
    )
    read = read_examples(ASKED, answer(text), UNREAD, "square", [])
    assert [c.label() for c in read] == ["square(3) == 9", "square(-2) == 4"]  # 5 and 25 are not in the prompt
    assert {c.origin for c in read} == {"model-read"} and read[0].line == 4


def test_read_examples_skip_those_the_patterns_already_found():
    found = [Check(4, "square(3)", "9")]
    text = "```python\nassert square(3) == 9\nassert square(-2) == 4\n```"
    read = read_examples(ASKED, answer(text), UNREAD, "square", found)
    assert [c.label() for c in read] == ["square(-2) == 4"]


@pytest.mark.parametrize(
    ("expression", "expected", "kept"),
    [
        ("f('abc')", "'cba'", True),  # the other quote mark
        ("f('abc')", "'xyz'", False),
        ("f([1, 2])", "True", True),  # "is true"
        ("f([1, 2])", "None", False),
        ("f(7)", "3", False),
        ("f('abc')", "2", False),  # 2 is in the prompt, but stated for another call
        ("f([1,2,3])", "2", True),
        ("f([1,2,3])", "22", False),  # not a whole word of what follows
        ("f('abc')", "'abc'", False),  # the value before the call does not count
    ],
)
def test_grounded_needs_the_call_and_then_its_value(expression, expected, kept):
    prompt = (
        'def f(x):\n    """Reverse: f("abc") gives "cba"; f([1,2]) is true.\n    f([1, 2, 3])\n      -> 2\n    """\n'
    )
    assert grounded(Check(1, expression, expected), prompt, "f") is kept


def test_an_example_the_model_made_up_from_the_docstring_s_numbers_is_dropped():
    read = read_examples(ASKED, answer("```python\nassert square(3) == 4\n```"), UNREAD, "square", [])
    assert read == []  # 3 and 4 are both in the prompt, but 4 is stated for square(-2)


def test_unread_calls_count_only_the_calls_of_the_function_that_the_found_examples_make():
    prompt = 'def f(x):\n    """f(f(1)) is 1 and g(2) is 3."""\n'
    assert unread_calls(prompt, "f", [Check(2, "f(f(1))", "1")]) == 0
    assert unread_calls(prompt, "f", [Check(2, "g(2)", "3")]) == 2


def test_settings_name_the_bad_value():
    with pytest.raises(ValueError, match="budget_share=0"):
        ExampleReaderSettings(budget_share=0)


class Reader:
    """A candidate source: the request for the examples gets `reading`, a code request the texts of `rows`; it
    keeps the requests it got."""

    def __init__(self, rows: list[str], reading: str):
        self.rows, self.reading, self.requests = rows, reading, []

    def generate(self, request, on_update=None, should_stop=None):
        self.requests.append(request)
        texts = [self.reading] if request.in_words else self.rows
        return GenerationResult([Candidate(t, [1], [-0.1], "stop") for t in texts], GenerationStats(wall_s=0.1))


def test_the_pipeline_checks_the_examples_the_model_read_and_ranks_by_them():
    """The patterns read square(3) is 9, which both candidates pass; the model reads square(-2) is 4 too, which
    only the right one passes, so it ranks first."""
    from app.requests import Limits, build_request
    from app.service import Pipeline
    from checks import CheckRunner

    checker = CheckRunner.create()
    assert checker.available, checker.reason
    right, wrong = "    return x * x\n", "    return 3 * x\n"
    request = build_request(
        UNREAD, k=2, budget_s=20.0, temperature=0.8, max_new_tokens=16, seed=1, limits=Limits(max_k=8)
    )
    reading = "```python\nassert square(3) == 9\nassert square(-2) == 4\n```"
    plain = Pipeline(checker=checker).run(Reader([wrong, right], reading), request)
    assert len(plain.checks.items) == 1 and plain.candidates[0].checks.passed == 1
    source = Reader([wrong, right], reading)
    result = Pipeline(checker=checker, example_reader=ExampleReaderSettings()).run(source, request)
    assert [c.label() for c in result.checks.items] == ["square(3) == 9", "square(-2) == 4"]
    assert result.checks.items[1].origin == "model-read"
    assert result.candidates[0].code == right and result.candidates[0].checks.passed == 2
    assert [r.in_words for r in source.requests] == [False, True]


def test_no_reading_where_the_patterns_read_every_call():
    from app.requests import Limits, build_request
    from app.service import Pipeline
    from checks import CheckRunner

    checker = CheckRunner.create()
    assert checker.available, checker.reason
    reading = "```python\nassert square(3) == 9\n```"
    request = build_request(
        READ, k=1, budget_s=20.0, temperature=0.8, max_new_tokens=16, seed=1, limits=Limits(max_k=8)
    )
    source = Reader(["    return x * x\n"], reading)
    Pipeline(checker=checker, example_reader=ExampleReaderSettings()).run(source, request)
    assert [r.in_words for r in source.requests] == [False]
    unread = Reader(["    return x * x\n"], reading)  # the same pipeline reads where a call is missed
    Pipeline(checker=checker, example_reader=ExampleReaderSettings()).run(unread, replace(request, prompt=UNREAD))
    assert [r.in_words for r in unread.requests] == [False, True]


def test_the_app_reads_examples_by_default_and_the_command_line_turns_it_off(entry_point):
    assert entry_point.parse_args([]).no_read_examples is False
    assert entry_point.parse_args(["--no-read-examples"]).no_read_examples is True


class FailingReader(Reader):
    """A source whose answer to the request in words fails (a server that cannot serve it)."""

    def generate(self, request, on_update=None, should_stop=None):
        if request.in_words:
            raise RuntimeError("the chat endpoint is down")
        return super().generate(request, on_update, should_stop)


def test_a_failed_reading_is_logged_and_the_run_goes_on_with_the_patterns_checks(caplog):
    from app.requests import Limits, build_request
    from app.service import Pipeline
    from checks import CheckRunner

    checker = CheckRunner.create()
    assert checker.available, checker.reason
    request = build_request(
        UNREAD, k=1, budget_s=20.0, temperature=0.8, max_new_tokens=16, seed=1, limits=Limits(max_k=8)
    )
    result = Pipeline(checker=checker, example_reader=ExampleReaderSettings()).run(
        FailingReader(["    return x * x\n"], ""), request
    )
    assert [c.label() for c in result.checks.items] == ["square(3) == 9"] and result.candidates[0].checks.passed == 1
    assert (
        "reading the prompt's examples with the model failed" in caplog.text and "chat endpoint is down" in caplog.text
    )
