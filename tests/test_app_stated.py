"""The answers' own checks as evidence (app/stated.py): where a prompt has no example, every candidate runs in the
sandbox on the checks all candidates state, the ranking follows dual agreement on them, a candidate that fails its
own stated example gets a finding that says so, and hostile self-tests cost only their author."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

import pytest
from test_app_checks import Replay  # a real candidate source that replays fixed texts

import languages
from app.chat_api import answer_text
from app.requests import Limits, build_request
from app.service import Pipeline
from app.stated import FAILS_OWN_CHECK, STATE_EXAMPLES, asks_for_usage
from engine.types import ChatTurn

PROMPT = "def is_valid_ipv4(s):\n"
REGEX = (
    "    import re\n"
    '    return bool(re.match(r"^(\\d{1,3}\\.){3}\\d{1,3}$", s))\n'
    "\n"
    'print(is_valid_ipv4("192.168.1.1"))  # Output: True\n'
    'print(is_valid_ipv4("256.0.0.1"))  # Output: False\n'
)
SPLIT = (
    '    parts = s.split(".")\n'
    "    return len(parts) == 4 and all(p.isdigit() and 0 <= int(p) <= 255 for p in parts)\n"
    "\n"
    'assert is_valid_ipv4("256.0.0.1") == False\n'
    'assert is_valid_ipv4("1.2.3.4") == True\n'
)
SPLIT_TOO = (
    '    parts = s.split(".")\n'
    "    if len(parts) != 4:\n"
    "        return False\n"
    "    return all(p.isdigit() and int(p) < 256 for p in parts)\n"
)
SPLIT_THREE = '    return s.count(".") == 3 and all(x.isdigit() and int(x) <= 255 for x in s.split("."))\n'


def _request(k: int):
    return build_request(PROMPT, k=k, budget_s=20.0, temperature=0.8, max_new_tokens=64, limits=Limits(max_k=8))


def test_the_answer_that_keeps_what_all_state_ranks_first_and_the_contradiction_is_named(checker):
    source = Replay([REGEX, REGEX, REGEX, SPLIT, SPLIT_TOO, SPLIT_THREE])
    without = Pipeline(checker=checker, stated_checks=False).run(source, _request(6))
    assert without.candidates[0].code == REGEX  # agreement alone: the two copies of the regex win
    result = Pipeline(checker=checker).run(source, _request(6))
    first = result.candidates[0]
    assert first.code in (SPLIT, SPLIT_TOO, SPLIT_THREE) and first.score_parts["stated_agreement"] > 0
    regex = next(c for c in result.candidates if c.code == REGEX)
    (finding,) = [f for f in regex.findings if f["kind"] == FAILS_OWN_CHECK]
    assert "is_valid_ipv4('256.0.0.1') == False" in finding["message"] and "True" in finding["message"]
    assert finding["line"] == 5  # the row's own line of the print
    assert not [f for f in first.findings if f["kind"] == FAILS_OWN_CHECK]
    items = result.as_dict()["stated_checks"]["items"]
    assert {i["label"] for i in items} >= {"is_valid_ipv4('256.0.0.1') == False", "is_valid_ipv4('1.2.3.4') == True"}
    assert next(i for i in items if i["label"].startswith("is_valid_ipv4('256"))["stated_by"] == [1, 2, 3, 4]


def test_hostile_self_tests_cost_only_their_author(checker, tmp_path):
    marker = tmp_path / "touched"
    loops = "    while True:\n        pass\n\nassert is_valid_ipv4('1.2.3.4') == True\n"
    hostile_top = (
        SPLIT_TOO + f"\nimport os\nos.system('touch {marker}')\nprint('x' * 10**8)\nwhile True:\n    pass\n"
        "assert is_valid_ipv4('1.1.1.1') == True\n"
    )
    crashes = "    raise SystemExit(3)\n\nassert is_valid_ipv4('0.0.0.0') == True\n"
    source = Replay([SPLIT, loops, hostile_top, crashes])
    started = time.monotonic()
    result = Pipeline(checker=checker).run(source, _request(4))
    assert time.monotonic() - started < 60
    assert not marker.exists()  # the top-level test code never ran, and nothing runs outside the sandbox
    by_code = {c.code: c for c in result.candidates}
    assert result.candidates[0].code in (SPLIT, hostile_top)
    assert by_code[loops].score_parts["stated_agreement"] == 0.0
    assert by_code[SPLIT].score_parts["stated_agreement"] > 0


IPV4_WORDS = "Write a Python function that checks whether a string is a valid IPv4 address."


def _answer(body: str) -> str:
    """A chat answer: prose, then the code block (the function, then its example usage)."""
    function = "def is_valid_ipv4(s):\n" + body.split("\n\n")[0] + "\n"
    usage = "\n".join(line for line in body.split("\n\n", 1)[1:]) or ""
    return f"Here is one:\n\n```python\n{function}\n# Example usage:\n{usage}```\n\nIt checks each part."


def test_an_answer_in_words_shows_its_example_usage_apart_from_the_code_to_copy(checker):
    source = Replay([_answer(SPLIT), _answer(SPLIT), _answer(REGEX)])
    result = Pipeline(checker=checker).run(
        source, build_request(IPV4_WORDS, k=3, budget_s=20.0, temperature=0.8, max_new_tokens=64, mode="words")
    )
    first = result.candidates[0]
    assert first.code.startswith("def is_valid_ipv4(s):") and "assert" not in first.code and "print" not in first.code
    assert first.example_usage.startswith("# Example usage:\nassert is_valid_ipv4(")
    text = answer_text(first, languages.PYTHON)
    assert text.index("```python\ndef is_valid_ipv4") < text.index("```python\n# Example usage:")
    assert "Example usage:\n\n```" not in text  # its own comment names it already
    assert first.ranking()["example_usage"] == first.example_usage
    asked = Pipeline(checker=checker).run(
        source, build_request(IPV4_WORDS + " Add unit tests.", k=3, budget_s=20.0, temperature=0.8, max_new_tokens=64)
    )
    assert "assert is_valid_ipv4(" in asked.candidates[0].code and asked.candidates[0].example_usage is None


class Heard(Replay):
    """Replay that keeps each request it is asked (what the rows were asked, as the engine reads it)."""

    def __init__(self, texts: list[str]):
        super().__init__(texts)
        self.requests = []

    def generate(self, request, on_update=None, should_stop=None):
        self.requests.append(request)
        return super().generate(request, on_update, should_stop)


def _words(text: str):
    return build_request(text, k=3, budget_s=20.0, temperature=0.8, max_new_tokens=64, mode="words")


def test_ranked_rows_in_words_are_asked_to_state_examples_and_the_result_keeps_the_users_request(checker):
    words = _words(IPV4_WORDS)
    source = Heard([_answer(SPLIT), _answer(REGEX)])
    result = Pipeline(checker=checker).run(source, words)
    assert source.requests[0].turns == (ChatTurn("system", STATE_EXAMPLES),) + words.turns
    assert result.request == words  # the result shows the conversation as the user sent it
    for request, asked_as_given in [
        (replace(words, k=1), "one row: nothing to cross-check"),
        (_words(IPV4_WORDS + " assert is_valid_ipv4('1.2.3.4') == True"), "the user's own check ranks them"),
        (replace(words, turns=(ChatTurn("system", "Be brief."),) + words.turns), "own"),
        (build_request(PROMPT, k=3, budget_s=5.0, temperature=0.8, max_new_tokens=16), "code, not words"),
        (_words("Write a JavaScript function that checks an IPv4 address."), "the hint is written in Python"),
    ]:
        source = Heard([_answer(SPLIT)] * request.k if request.in_words else [SPLIT_TOO])
        Pipeline(checker=checker).run(source, request)
        assert source.requests[0].turns == request.turns, asked_as_given
    source = Heard([_answer(SPLIT), _answer(REGEX)])
    Pipeline(checker=checker, stated_checks=False).run(source, words)
    assert source.requests[0].turns == words.turns  # stated checks off: nothing is asked for them


def test_which_requests_ask_for_their_test_code():
    for asked in (
        "Write a function with tests",
        "Write a Python program that reads a number from stdin",
        "Write it and add some unit tests",
        "Write a function and show me how to call it, with example usage",
        "Write it with a main function",
        "Read two integers from the user and print their sum",
        "Write the function, with examples of its use",
        "Give doctests for it",
    ):
        assert asks_for_usage(asked), asked
    for not_asked in (
        IPV4_WORDS,
        "Write a python function to find the main diagonal.\nYour code should pass this test:\nassert f([[1]]) == [1]",
        "Write a function to convert a unit of length.",
        "Write a function to find the n-th ludic number. https://example.org/python-program-to-print-ludic-numbers",
        "Write a function to sum a tuple.\nThe function is `def sum_tuple(test_tup)`.",
    ):
        assert not asks_for_usage(not_asked), not_asked


JS_REGEX = (
    "function isValidIPv4(s) {\n  return /^(\\d{1,3}\\.){3}\\d{1,3}$/.test(s);\n}\n\n"
    'console.log(isValidIPv4("192.168.1.1")); // Output: true\n'
    'console.log(isValidIPv4("256.0.0.1")); // Output: false\n'
)
JS_SPLIT = (
    'function isValidIPv4(s) {\n  const parts = s.split(".");\n'
    "  return parts.length === 4 && parts.every((p) => /^\\d+$/.test(p) && Number(p) <= 255);\n}\n\n"
    'console.assert(isValidIPv4("256.0.0.1") === false);\nconsole.assert(isValidIPv4("1.2.3.4") === true);\n'
)
JS_SPLIT_TOO = (
    'function isValidIPv4(s) {\n  const parts = s.split(".");\n  if (parts.length !== 4) return false;\n'
    "  for (const p of parts) {\n    if (!/^[0-9]+$/.test(p) || +p > 255) return false;\n  }\n  return true;\n}\n"
)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH here")
def test_a_javascript_answer_that_contradicts_itself_ranks_below_one_that_keeps_what_all_state(checker):
    three = 'function isValidIPv4(s) {\n  const p = s.split(".");\n'
    three += "  return p.length === 4 && p.every((x) => x && +x < 256);\n}\n"
    codes = (JS_REGEX, JS_REGEX, JS_REGEX, JS_SPLIT, JS_SPLIT_TOO, three)
    asked = build_request(
        "Write a JavaScript function that checks an IPv4 address.",
        k=6,
        budget_s=20.0,
        temperature=0.8,
        max_new_tokens=64,
        mode="words",
    )
    source = Replay([f"Here it is:\n\n```javascript\n{code}```\n" for code in codes])
    without = Pipeline(checker=checker, stated_checks=False).run(source, asked)
    shown_regex = JS_REGEX.split("\n\nconsole")[0] + "\n"  # its example usage is shown apart
    assert without.candidates[0].code == shown_regex  # agreement alone: the copies of the regex win
    result = Pipeline(checker=checker).run(source, asked)
    assert result.language.name == "javascript"
    first = result.candidates[0]
    assert first.code == JS_SPLIT.split("\n\nconsole")[0] + "\n" and first.score_parts["stated_agreement"] > 0
    regex = next(c for c in result.candidates if c.code == shown_regex)
    assert regex.example_usage == JS_REGEX.split("\n\n", 1)[1]
    (finding,) = [f for f in regex.findings if f["kind"] == FAILS_OWN_CHECK]
    assert 'isValidIPv4("256.0.0.1") == false' in finding["message"] and (finding["line"], finding["in"]) == (
        2,
        "example_usage",
    )
