"""Requests in words: /v1/chat/completions called by the official `openai` client against the real app (tiny models
for the protocol; the bundled 0.5B, marked, for answers that are code), and how the app tells words from code."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from local_app import launch_local

from app.chat_api import Chat
from app.models import EngineHub, ModelChoice, menu
from app.openai_api import Completions
from app.requests import Limits, build_checks, build_request, reads_as_words
from app.routes import mount_protocols
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo
from checks import CheckRunner
from static_eval import AnalyzerSettings, StaticAnalyzer

LIMITS = Limits(max_k=6, max_budget_s=60, max_new_tokens=512)
IPV4 = (
    "Write a Python function is_ipv4(text) that checks whether a string is a valid IPv4 address.\n"
    'It must satisfy assert is_ipv4("192.168.0.1") and not is_ipv4("256.1.1.1")'
)


def serve(hub: EngineHub, checker: CheckRunner | None = None):
    analyzer = StaticAnalyzer(AnalyzerSettings(lint=False))
    pipeline = Pipeline(analyzer=analyzer, checker=checker)
    service = Service(hub, pipeline, LIMITS)
    demo = build_demo(service)
    url = launch_local(demo)
    mount_protocols(demo, service, [Completions(), Chat()])
    return demo, analyzer, url


@pytest.fixture(scope="module")
def tiny():
    demo, analyzer, url = serve(EngineHub([ModelChoice("tiny", "tiny:0")]))
    yield url
    demo.close()
    analyzer.close()


@pytest.fixture(scope="module")
def client(tiny):
    return openai.OpenAI(base_url=tiny + "v1", api_key="unused", max_retries=0)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Write a Python function that checks whether a string is a valid IPv4 address.", True),
        ("Write a function to find the shared elements.\nassert f((1, 2), (2, 3)) == (2,)", True),
        ("how do I reverse a list in place", True),
        ('def add(a, b):\n    """Return a + b."""\n', False),
        ("// Return the sum of a and b\nfunction add(a, b) {\n", False),
        ("import numpy as np\n", False),
        ("#include <stdio.h>\nint main() {\n", False),
        ("print('hello world and more words')", False),
        ("Write a Python function add(a, b) that returns the sum of a and b.", True),  # a call inside a sentence
        ("Reverse a string.", True),
        ("Fix this bug:", True),
        ("Add two numbers (a and b)", True),
        ("Print the numbers from 1 to 10 in Rust", True),
        ("SELECT name FROM users WHERE age > 30", False),
        ("docker run -it --rm ubuntu bash", False),
        ("mkdir -p build && cd build", False),
        ("    Return the indices of the two numbers", False),  # an editor's window from inside a docstring
    ],
)
def test_a_prompt_that_begins_with_a_sentence_is_a_request_in_words(text, words):
    assert reads_as_words(text) is words
    assert build_request(text, k=2, budget_s=5, temperature=0.8, max_new_tokens=16).in_words is words


def test_mode_and_language_fields_override_what_the_text_says():
    assert not build_request(IPV4, k=2, budget_s=5, temperature=0.8, max_new_tokens=16, mode="code").in_words
    assert build_request("def f(x):\n", k=2, budget_s=5, temperature=0.8, max_new_tokens=16, mode="words").in_words
    made = build_request("function f(a) {\n", k=2, budget_s=5, temperature=0.8, max_new_tokens=16, language="ts")
    assert (made.language.name, made.language_from) == ("typescript", "field")
    with pytest.raises(ValueError, match=r"language='cobol' is not known: use one of python, javascript"):
        build_request("x", k=2, budget_s=5, temperature=0.8, max_new_tokens=16, language="cobol")
    with pytest.raises(ValueError, match=r"mode='prose' is unknown: choose one of auto, code, words"):
        build_request("x", k=2, budget_s=5, temperature=0.8, max_new_tokens=16, mode="prose")
    with pytest.raises(ValueError, match=r"mode='words' takes no code after the cursor"):
        build_request("Write it.", k=2, budget_s=5, temperature=0.8, max_new_tokens=16, suffix="x = 1\n", mode="words")
    go = build_request(
        "package main\n\nfunc Reverse(s string) string {\n", k=2, budget_s=5, temperature=0.8, max_new_tokens=16
    )
    assert go.language.name == "go" and build_checks("", language=go.language).user == ()  # no checks: no refusal


def test_chat_choices_come_back_best_first_as_assistant_messages(client):
    completion = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "system", "content": "Answer in code."}, {"role": "user", "content": IPV4}],
        n=3,
        max_tokens=12,
        temperature=0.9,
        seed=3,
    )
    assert completion.object == "chat.completion" and len(completion.choices) == 3
    assert [c.index for c in completion.choices] == [0, 1, 2]
    assert all(c.message.role == "assistant" and isinstance(c.message.content, str) for c in completion.choices)
    ranks = [c.model_extra["ranked_drafts"]["rank"] for c in completion.choices]
    assert ranks == sorted(ranks) and ranks[0] == 1
    language = completion.model_extra["ranked_drafts"]["language"]
    assert language["in_words"] and language["name"] == "python"
    checks = completion.model_extra["ranked_drafts"]["checks"]
    assert [item["origin"] for item in checks["items"]] == ["assert"]  # the request's assert line


def test_chat_streams_each_answer_then_done(client):
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": IPV4}], n=2, max_tokens=8, seed=1, stream=True
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    finished = [c.choices[0].index for c in chunks if c.choices[0].finish_reason is not None]
    assert sorted(finished) == [0, 1]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": []}, r"messages must be a non-empty array"),
        ({"messages": [{"role": "robot", "content": "x"}]}, r"messages\[0\]\.role='robot' is invalid"),
        ({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}, r"must be the user"),
        ({"messages": [{"role": "user", "content": 5}]}, r"messages\[0\]\.content must be a string"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]}, r"messages\[0\]\.content\[0\]"),
        ({"messages": [{"role": "user", "content": "a\ud800"}]}, r"not valid UTF-8"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 9}, r"n=9 is out of range"),
        ({"messages": [{"role": "user", "content": "x"}], "language": "klingon"}, r"language='klingon' is not known"),
    ],
)
def test_bad_chat_bodies_are_refused_in_openais_error_shape(tiny, body, message):
    sent = json.dumps({"model": "tiny", "max_tokens": 4} | body)  # ASCII: a lone surrogate travels as \\ud800
    response = httpx.post(
        tiny + "v1/chat/completions", content=sent, headers={"content-type": "application/json"}, timeout=30
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert __import__("re").search(message, error["message"]), error["message"]


def test_completions_take_a_request_in_words_too(client):
    completion = client.completions.create(
        model="tiny", prompt=IPV4, n=2, max_tokens=8, seed=2, extra_body={"mode": "words"}
    )
    assert len(completion.choices) == 2
    assert json.dumps(completion.model_extra["ranked_drafts"])  # JSON all through


# --- the bundled model: answers that are code -------------------------------------------------------------------
@pytest.mark.bundled
def test_a_request_in_words_gets_ranked_checked_code_on_the_bundled_model():
    hub = EngineHub(menu())
    demo, analyzer, url = serve(hub, CheckRunner.create())
    try:
        chat = openai.OpenAI(base_url=url + "v1", api_key="unused", max_retries=0, timeout=600)
        completion = chat.chat.completions.create(
            model="bundled 0.5B alone (fast)",
            messages=[{"role": "user", "content": IPV4}],
            n=4,
            max_tokens=400,
            seed=0,
            extra_body={"budget_s": 60},
        )
        best = completion.choices[0]
        ranking = best.model_extra["ranked_drafts"]
        assert "def is_ipv4" in ranking["code"] and "```python\n" in best.message.content
        assert ranking["parses"] is True and ranking["checks"]["outcomes"], ranking
        js = httpx.post(
            url + "v1/completions",
            json={"prompt": "// Return the larger of a and b\nfunction max2(a, b) {\n", "n": 2, "max_tokens": 64},
            timeout=600,
        ).json()
        assert js["ranked_drafts"]["stats"]["generated_tokens"] > 0
        first = js["choices"][0]
        assert first["text"].rstrip().endswith("}"), first  # stopped where the function closes
        assert not [f for f in first["ranked_drafts"]["findings"] if f["kind"] == "syntax-error"], first
        models = httpx.get(url + "v1/models", timeout=30).json()["data"]
        fast = next(m for m in models if m["id"] == "bundled 0.5B alone (fast)")["ranked_drafts"]["formats"]
        formats = fast["bundled:qwen2.5-coder-0.5b"]  # timed at its first start, on this machine
        assert "formats timed on this CPU" in formats["why"] and formats["dtype"] in ("bfloat16", "float32")
    finally:
        demo.close()
        hub.close()
        analyzer.close()


def test_models_lists_each_choice_with_its_state_and_formats(tiny):
    listed = httpx.get(tiny + "v1/models", timeout=30).json()["data"]
    assert [m["id"] for m in listed] == ["tiny"]
    httpx.post(tiny + "v1/completions", json={"prompt": "def f(x):\n", "max_tokens": 2}, timeout=60).raise_for_status()
    (entry,) = httpx.get(tiny + "v1/models", timeout=30).json()["data"]
    assert entry["ranked_drafts"]["state"] == "ready"
    assert entry["ranked_drafts"]["formats"]["tiny:0"]["why"] == "a tiny test model: formats are not timed"
