"""Search until the examples pass: further rounds of k rows are drawn only while no candidate passes every check and
the budget allows; the result shows the k best of all rounds and says how many were drawn and why it stopped."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app import search
from app.render import status_html
from app.requests import CheckRequest, Limits, build_checks, build_request
from app.results import Progress
from app.search import SearchSettings, combined, round_request
from app.service import Pipeline
from engine import Candidate, GenerationRequest, GenerationResult, GenerationStats, load_engine
from engine.types import FINISH_STOP

PROMPT = 'def add(a, b):\n    """Add two numbers.\n    >>> add(2, 3)\n    5\n    """\n'
WRONG, RIGHT = "    return a * b + 0\n", "    return a + b\n"


class Rounds:
    """A candidate source that answers its n-th request with the n-th list of texts (the last one again after
    that), as a server replaying a recording of several rounds; it keeps the requests it got."""

    def __init__(self, *rounds: list[str]):
        self.rounds, self.requests = rounds, []

    def generate(self, request, on_update=None, should_stop=None):
        texts = self.rounds[min(len(self.requests), len(self.rounds) - 1)]
        self.requests.append(request)
        rows = [Candidate(text, [1] * 3, [-0.1] * 3, FINISH_STOP) for text in texts]
        stats = GenerationStats(wall_s=0.5, generated_tokens=3 * len(texts), prompt_tokens=20)
        result = GenerationResult(rows, stats)
        if on_update is not None:
            on_update(result)
        return result


def _request(k=3, budget_s=20.0, temperature=0.8, seed=5):
    return build_request(
        PROMPT, k=k, budget_s=budget_s, temperature=temperature, max_new_tokens=16, seed=seed, limits=Limits(max_k=8)
    )


def test_a_second_round_is_drawn_when_no_candidate_passes_and_its_find_ranks_first(checker):
    source = Rounds([WRONG, WRONG, WRONG.replace("+ 0", "- 0")], [WRONG, RIGHT, WRONG])
    heard = []
    result = Pipeline(checker=checker).run(source, _request(), on_round=lambda n, drawn: heard.append((n, drawn)))
    assert heard == [(2, 3)]
    assert result.search.as_dict() == {"rounds": 2, "drawn": 6, "shown": 3, "reason": search.PASSED}
    assert result.candidates[0].code == RIGHT and result.candidates[0].checks.passed == 1
    assert result.candidates[0].indices == [4]  # rows are numbered over the rounds
    assert len(list(result.ranked_copies())) == 3  # the protocols still give k choices
    second = source.requests[1]
    assert second.seed == 5 + search.SEED_STRIDE and not second.greedy_first and second.budget_s < 20.0
    assert result.engine_stats.generated_tokens == 18 and result.engine_stats.prompt_tokens == 20
    assert "searched 2 rounds, 6 candidates drawn" in status_html(result)
    assert result.summary()["search"]["rounds"] == 2


def test_no_round_is_drawn_when_a_candidate_passes(checker):
    source = Rounds([WRONG, RIGHT])
    result = Pipeline(checker=checker).run(source, _request(k=2))
    assert len(source.requests) == 1 and result.search.reason == search.PASSED


def test_the_search_ends_at_its_round_limit_and_shows_k(checker):
    texts = [WRONG.replace("0", str(i)) for i in range(3)]
    source = Rounds(texts, [t.replace("a *", "b *") for t in texts], [t.replace("a *", "a -") for t in texts])
    pipeline = Pipeline(checker=checker, searching=SearchSettings(max_rounds=3))
    result = pipeline.run(source, _request())
    assert (result.search.rounds, result.search.drawn, result.search.reason) == (3, 9, search.ROUNDS)
    assert len(result.candidates) == 3 and len(result.similarity) == 3 and len(result.similarity[0]) == 3


@pytest.mark.parametrize(
    "asked, request_changes, reason",
    [
        (CheckRequest(search=False), {}, search.OFF),  # editors: their budget is the time to one line
        (CheckRequest(run=False), {}, search.NO_CHECKS),
        (CheckRequest(), {"temperature": 0.0}, search.GREEDY),
    ],
)
def test_no_search_where_it_is_off_has_nothing_to_run_or_one_answer(checker, asked, request_changes, reason):
    source = Rounds([WRONG])
    result = Pipeline(checker=checker).run(source, replace(_request(k=1), **request_changes), checks=asked)
    assert len(source.requests) == 1 and result.search.reason == reason


def test_a_user_check_that_none_passes_starts_a_search_too(checker):
    asked = build_checks("assert add(1, 1) == 3")  # nobody can pass it: the search runs to its limit
    source = Rounds([RIGHT])
    result = Pipeline(checker=checker, searching=SearchSettings(max_rounds=2)).run(source, _request(k=1), checks=asked)
    assert result.search.rounds == 2 and result.search.reason == search.ROUNDS


@pytest.mark.parametrize(
    "rounds, left_s, last_s, passed, n_checks, reason",
    [
        (1, 30.0, 5.0, [1, 0], 1, search.PASSED),
        (1, 30.0, 5.0, None, 0, search.NO_CHECKS),
        (1, 30.0, 5.0, [0, 0], 1, None),
        (8, 30.0, 5.0, [0, 0], 1, search.ROUNDS),
        (1, 2.0, 5.0, [0, 0], 1, search.BUDGET),  # less than half the last round's time left
        (1, 0.5, 0.2, [0, 0], 1, search.BUDGET),  # under a second
        (1, 3.0, 5.0, [1, 1], 2, None),  # every check, not some
    ],
)
def test_the_rule_of_another_round(rounds, left_s, last_s, passed, n_checks, reason):
    request = GenerationRequest("def f():\n", k=2)
    assert SearchSettings().why_stop(rounds, left_s, last_s, passed, n_checks, request) == reason


def test_round_requests_have_seeds_of_their_own():
    request = GenerationRequest("def f():\n", seed=2**31 - 1, greedy_first=True)
    later = round_request(request, 1, 12.5)
    assert later.seed == (2**31 - 1 + search.SEED_STRIDE) % 2**31 and not later.greedy_first
    assert later.budget_s == 12.5 and round_request(replace(request, seed=None), 1, 3.0).seed is None


def test_combined_results_keep_the_rows_in_order_and_add_the_counts():
    one = GenerationResult([Candidate("a")], GenerationStats(wall_s=1.0, generated_tokens=4, drafter_choices={"x": 1}))
    two = GenerationResult([Candidate("b")], GenerationStats(wall_s=2.0, generated_tokens=6, drafter_choices={"x": 2}))
    both = combined(one, two)
    assert [c.text for c in both.candidates] == ["a", "b"]
    assert (both.stats.wall_s, both.stats.generated_tokens, both.stats.drafter_choices) == (3.0, 10, {"x": 3})


def test_the_page_says_a_search_round_is_running():
    progress = Progress.of("generating", None, GenerationRequest("def f():\n", k=4), {}, 3.0, None, (2, 4))
    assert "none of the 4 candidates drawn passes every check; drawing 4 more (round 2)" in status_html(progress)
    assert progress.as_dict()["progress"]["search_round"] == 2


def test_a_real_engine_searches_with_new_samples_each_round(checker):
    """The tiny random-weight engine never passes the check: each round draws k new rows (new seeds), and the
    page's stream hears every round's rows after the earlier ones."""
    engine = load_engine("tiny:0", None)
    updates = []
    pipeline = Pipeline(checker=checker, searching=SearchSettings(max_rounds=3))
    request = build_request(
        "def double(x):\n    return",
        k=2,
        budget_s=20.0,
        temperature=0.8,
        max_new_tokens=6,
        seed=0,
        limits=Limits(max_k=8),
    )
    asked = build_checks("assert double(2) == 4")
    result = pipeline.run(engine, request, checks=asked, on_update=lambda r: updates.append(len(r.candidates)))
    assert result.search.rounds == 3 and result.search.drawn == 6
    assert max(updates) == 6 and min(updates) == 2
    texts = [c.code for c in result.candidates]
    assert result.engine_stats.generated_tokens >= 6 * 6 - 6 and len(set(texts)) == len(texts) >= 2


def test_the_search_is_asked_for_as_true_or_false():
    assert build_checks("", True, None, False).search is False and build_checks().search is True
    with pytest.raises(ValueError, match=r"search='no' is invalid: it must be true or false"):
        build_checks("", True, None, "no")


class StopsDuringRound(Rounds):
    """Rounds whose second request is stopped while it runs (a Stop press, a new request superseding it)."""

    def __init__(self, control, *rounds):
        super().__init__(*rounds)
        self.control = control

    def generate(self, request, on_update=None, should_stop=None):
        if self.requests:
            self.control.stop("stopped by the user")
        return super().generate(request, on_update, should_stop)


def test_a_stop_during_a_later_round_drops_its_rows_unchecked(checker):
    from app.runs import RunControl

    control = RunControl(None)
    source = StopsDuringRound(control, [WRONG], [RIGHT])
    result = Pipeline(checker=checker).run(source, _request(k=1), control)
    assert result.search.reason == search.STOPPED and result.search.drawn == 1
    assert [c.code for c in result.candidates] == [WRONG] and result.stopped == "stopped by the user"


def test_search_settings_name_a_bad_value():
    with pytest.raises(ValueError, match=r"min_left_share=nan is out of range"):
        SearchSettings(min_left_share=float("nan"))


ADD_PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'  # no example: the model's tests are asked
ADD_WRONG = "    return a * b + 0\n"


def _add_request():
    return build_request(
        ADD_PROMPT, k=3, budget_s=20.0, temperature=0.8, max_new_tokens=16, seed=1, limits=Limits(max_k=8)
    )


class Answers(Rounds):
    """Candidates for the code request, then the model's answer to the request for tests."""

    def generate(self, request, on_update=None, should_stop=None):
        if request.in_words:
            answer = "```python\nassert add(2, 3) == 5\nassert add(1, 1) == 2\nassert add(0, 0) == 1\n```"
            rows = [Candidate(answer, [1], [-0.1], FINISH_STOP)] * request.k
            return GenerationResult(rows, GenerationStats(wall_s=0.2))
        return super().generate(request, on_update, should_stop)


def test_where_the_prompt_has_no_examples_the_models_tests_rank_by_agreement(checker):
    """Two wrong candidates agree with each other textually; the model's tests (one of them wrong) put the right one
    first: it passes two of them, and dual agreement weighs that above the wrong pair's zero."""
    from app.model_checks import ModelCheckSettings

    wrong = ADD_WRONG
    source = Answers([wrong, wrong.replace("+ 0", "+ 0 "), RIGHT])
    request = _add_request()
    plain = Pipeline(checker=checker).run(source, request)
    assert plain.candidates[0].code != RIGHT and plain.model_tests is None
    result = Pipeline(checker=checker, model_tests=ModelCheckSettings()).run(Answers(source.rounds[0]), request)
    assert result.candidates[0].code == RIGHT and result.candidates[0].score_parts["agreement"] == 2.0
    assert [c.label() for c in result.model_tests.items] == ["add(2, 3) == 5", "add(1, 1) == 2", "add(0, 0) == 1"]
    assert result.as_dict()["model_tests"]["items"][0]["origin"] == "model"


class Continues(Rounds):
    """Candidates for the code request, then the rows that go on past row 0 into an assert each (the prompt ends
    with `assert add(`): one cut by its token limit, one the same as another."""

    def generate(self, request, on_update=None, should_stop=None):
        if request.prompt.endswith("assert add("):
            texts = ["2, 3) == 5", "1, 1) == 2", "0,", "0, 0) == 1", "2, 3) == 5"]
            rows = [Candidate(text, [1], [-0.1], FINISH_STOP) for text in texts]
            self.requests.append(request)
            return GenerationResult(rows, GenerationStats(wall_s=0.2))
        return super().generate(request, on_update, should_stop)


def test_the_continuation_form_reads_the_asserts_the_model_writes_past_the_greedy_answer(checker):
    """The tests come from the model going on past row 0 (its program, then `assert add(`), one line a row: the cut
    row is left out, the same assert twice is one check, and the right candidate ranks first by agreement on them."""
    from app.model_checks import CONTINUED

    prompt, wrong = ADD_PROMPT, ADD_WRONG
    source = Continues([wrong, wrong.replace("+ 0", "+ 0 "), RIGHT])
    request = _add_request()
    result = Pipeline(checker=checker, model_tests=CONTINUED).run(source, request)
    asked = source.requests[-1]
    assert asked.prompt == prompt + wrong.rstrip() + "\n\n\nassert add(" and not asked.stop_at_body_end
    assert (asked.k, asked.max_new_tokens, asked.greedy_first, asked.stop) == (4, 32, True, ("\n",))
    assert [c.label() for c in result.model_tests.items] == ["add(2, 3) == 5", "add(1, 1) == 2", "add(0, 0) == 1"]
    assert result.candidates[0].code == RIGHT and result.candidates[0].score_parts["agreement"] == 2.0


class Tails(Rounds):
    """A local engine's answer where the request asks for tails: each row that ended by itself wrote an assert line
    past its code (one cut mid-line, one the same as another's)."""

    TAILS = ["2, 3) == 5", "1, 1) == 2", "0,"]

    def generate(self, request, on_update=None, should_stop=None):
        result = super().generate(request, on_update, should_stop)
        if request.tail:
            for row, tail in zip(result.candidates, self.TAILS):
                row.tail = tail
        return result


def test_the_continuation_form_reads_the_tails_the_rows_wrote_in_their_own_batch(checker):
    """Where the engine writes tails, the first round asks for them (`assert add(` past each row's code) and the
    model's tests are the tails' asserts: no second request, the cut tail left out, the right candidate first."""
    from app.model_checks import CONTINUED

    wrong = ADD_WRONG
    source = Tails([wrong, wrong.replace("+ 0", "+ 0 "), RIGHT])
    request = _add_request()
    result = Pipeline(checker=checker, model_tests=CONTINUED).run(source, request)
    assert [r.tail for r in source.requests] == ["\n\n\nassert add("]
    assert [c.label() for c in result.model_tests.items] == ["add(2, 3) == 5", "add(1, 1) == 2"]
    assert result.candidates[0].code == RIGHT and result.candidates[0].score_parts["agreement"] == 2.0


class WordsTails(Tails):
    """Answers in words whose rows wrote tails past their code (inside the block, after `assert`)."""

    TAILS = [" is_even(4) == True", " is_even(3) == False", " print(1)", " other(2) == 1"]


def test_answers_in_words_write_tails_that_call_their_own_function(checker):
    """A request in words without asserts: each answer goes on inside its code block after `assert`; the asserts
    that call a function the row's code defines are the model's tests (a print and a call of another name are
    not), and the answer that keeps them ranks first."""
    from app.model_checks import CONTINUED

    odd = "Here:\n\n```python\ndef is_even(n):\n    return n % 2 == 1\n```\n"
    right = "Here:\n\n```python\ndef is_even(n):\n    return n % 2 == 0\n```\n"
    source = WordsTails([odd, odd.replace("== 1", "== 1 "), right, right])
    request = build_request(
        "Write a Python function is_even(n).", k=4, budget_s=20.0, temperature=0.8, max_new_tokens=64, mode="words"
    )
    result = Pipeline(checker=checker, model_tests=CONTINUED).run(source, request)
    assert [r.tail for r in source.requests] == ["\n\n\nassert"]
    assert [c.label() for c in result.model_tests.items] == ["is_even(4) == True", "is_even(3) == False"]
    assert "% 2 == 0" in result.candidates[0].code and result.candidates[0].score_parts["agreement"] > 0


@pytest.mark.parametrize(
    ("prompt", "user", "settings", "k"),
    [
        ('def add(a, b):\n    """Add two numbers.\n    >>> add(2, 3)\n    5\n    """\n', "", "continuation", 3),
        ('def add(a, b):\n    """Add two numbers."""\n', "assert add(2, 3) == 5", "continuation", 3),
        ('def add(a, b):\n    """Add two numbers."""\n', "", "chat", 3),
        ('def add(a, b):\n    """Add two numbers."""\n', "", None, 3),
        ('def add(a, b):\n    """Add two numbers."""\n', "", "continuation", 1),
    ],
    ids=["prompt-examples", "user-checks", "chat-form", "off", "k1"],
)
def test_tails_are_asked_only_where_the_continuations_tests_would_be(checker, prompt, user, settings, k):
    from app.model_checks import model_tests

    source = Tails([RIGHT] * k)
    request = build_request(prompt, k=k, budget_s=20.0, temperature=0.8, max_new_tokens=16, seed=1, limits=Limits())
    checks = build_checks(user)
    Pipeline(checker=checker, model_tests=model_tests(settings)).run(source, request, checks=checks)
    assert source.requests[0].tail == ""


def test_model_check_settings_name_a_bad_form():
    from app.model_checks import ModelCheckSettings

    with pytest.raises(ValueError, match=r"form='prose' is unknown: choose one of chat, continuation"):
        ModelCheckSettings(form="prose")


@pytest.mark.bundled
def test_the_bundled_models_rows_go_on_past_their_code_into_tails_the_candidates_run(checker):
    """The real 0.5B, a prompt without examples: each row goes on past its code into an assert line that calls the
    function (its tail, in the same batch), read as the model's tests (origin "model"), and every candidate ran on
    them."""
    from app.model_checks import CONTINUED

    prompt = 'def is_palindrome(s: str) -> bool:\n    """Return whether s reads the same forwards and backwards."""\n'
    request = build_request(
        prompt, k=4, budget_s=60.0, temperature=0.8, max_new_tokens=64, seed=1, limits=Limits(max_k=8)
    )
    engine = Counted(load_engine("bundled:qwen2.5-coder-0.5b"))
    result = Pipeline(checker=checker, model_tests=CONTINUED).run(engine, request)
    items = result.model_tests.items
    assert items and all(c.expression.startswith("is_palindrome(") and c.origin == "model" for c in items)
    assert all("agreement" in c.score_parts for c in result.candidates)
    assert engine.calls == 1  # the asserts were the rows' tails, written in the round's own batch


@pytest.mark.bundled
def test_the_bundled_models_answers_in_words_write_tails_that_test_their_function(checker):
    """The real 0.5B, a request in words without an example: the answers' tails are asserts on the function they
    define, read as the model's tests, in one call."""
    from app.model_checks import CONTINUED

    request = build_request(
        "Write a Python function is_palindrome(s) that tells whether a string reads the same backwards.",
        k=4,
        budget_s=60.0,
        temperature=0.8,
        max_new_tokens=160,
        seed=1,
        mode="words",
    )
    engine = Counted(load_engine("bundled:qwen2.5-coder-0.5b"))
    result = Pipeline(checker=checker, model_tests=CONTINUED).run(engine, request)
    items = result.model_tests.items
    assert items and all("is_palindrome(" in c.expression and c.origin == "model" for c in items)
    assert engine.calls == 1


class Counted:
    """The real engine, its generate calls counted."""

    def __init__(self, engine):
        self.engine, self.calls = engine, 0

    def generate(self, request, on_update=None, should_stop=None):
        self.calls += 1
        return self.engine.generate(request, on_update=on_update, should_stop=should_stop)


class CutFirst(Continues):
    """As Continues, but the first round's row 0 is cut by its limit mid-statement."""

    def generate(self, request, on_update=None, should_stop=None):
        result = super().generate(request, on_update, should_stop)
        if not request.prompt.endswith("assert add("):
            result.candidates[0].finish_reason = "length"
        return result


def test_the_continuation_goes_on_past_the_first_row_that_ended_when_the_greedy_one_was_cut(checker):
    from app.model_checks import CONTINUED

    prompt = ADD_PROMPT
    source = CutFirst(["    x = [a,\n", RIGHT, RIGHT])
    request = _add_request()
    result = Pipeline(checker=checker, model_tests=CONTINUED).run(source, request)
    assert source.requests[-1].prompt == prompt + RIGHT.rstrip() + "\n\n\nassert add("
    assert [c.label() for c in result.model_tests.items] == ["add(2, 3) == 5", "add(1, 1) == 2", "add(0, 0) == 1"]


def test_a_continued_row_states_only_the_asserts_that_call_the_function_by_its_name():
    """The second-request form reads every assert a row writes past `assert add(`; one that calls the candidate's
    helper `my_add` is not a test of `add` (a substring match counted it)."""
    from app.model_checks import continued_checks

    rows = GenerationResult(
        [Candidate("2, 3) == 5\nassert my_add(1, 1) == 2\nassert add(0, 0) == 0\n")], GenerationStats()
    )
    program = "def my_add(a, b):\n    return a + b\n\n\ndef add(a, b):\n    return my_add(a, b)\n"
    found = continued_checks(rows, program, "add")
    assert [c.label() for c in found] == ["add(2, 3) == 5", "add(0, 0) == 0"]
