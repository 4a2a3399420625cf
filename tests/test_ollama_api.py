"""Ollama's API (/api/generate, /api/show, /api/tags, /api/version) through the official `ollama` Python client and
the request Continue's autocomplete sends (continuedev/continue core/llm/llms/Ollama.ts), on a tiny FIM model."""

from __future__ import annotations

import json

import httpx
import ollama
import pytest
from local_app import launch_local

from app.models import EngineHub, ModelChoice
from app.ollama_api import Ollama
from app.requests import Limits
from app.routes import mount_protocols
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo

LIMITS = Limits(max_k=4, max_budget_s=20, max_new_tokens=128)
PREFIX = "def area(radius):\n    return 3.14159 * radius ** 2\n\n\ndef circumference(radius):\n    "
SUFFIX = "\n\n\nprint(area(1.0))\n"
# Continue's FIM body: prompt = prefix, suffix, raw, options from its completion options, keep_alive, stream
CONTINUE = {
    "model": "qwen2.5-coder:1.5b",
    "prompt": PREFIX,
    "suffix": SUFFIX,
    "raw": True,
    "options": {
        "temperature": 0.01,
        "top_p": None,
        "top_k": None,
        "num_predict": 24,
        "num_ctx": 8096,
        "stop": ["<|endoftext|>", "\n\n\n"],
    },
    "keep_alive": 1800,
    "stream": True,
}


@pytest.fixture(scope="module")
def url():
    hub = EngineHub([ModelChoice("tiny fim", "tiny:0:fim", "tiny:1:fim")])
    pipeline = Pipeline()
    service = Service(hub, pipeline, LIMITS)
    demo = build_demo(service)
    address = launch_local(demo)
    mount_protocols(demo, service, [Ollama()])
    yield address
    demo.close()


def test_the_official_client_gets_a_middle_streamed_and_whole(url):
    client = ollama.Client(host=url.rstrip("/"))
    whole = client.generate(
        model="qwen2.5-coder:1.5b", prompt=PREFIX, suffix=SUFFIX, options={"num_predict": 16, "temperature": 0}
    )
    assert whole.done and whole.done_reason in ("stop", "length") and isinstance(whole.response, str)
    assert whole.eval_count is not None and whole.prompt_eval_count > 0
    parts = list(
        client.generate(
            model="qwen2.5-coder:1.5b",
            prompt=PREFIX,
            suffix=SUFFIX,
            options={"num_predict": 16, "temperature": 0},
            stream=True,
        )
    )
    assert parts[-1].done and not any(p.done for p in parts[:-1])
    assert "".join(p.response for p in parts) == whole.response  # greedy: the same middle either way


def test_continue_sees_a_model_that_fills_in_the_middle(url):
    client = ollama.Client(host=url.rstrip("/"))
    shown = httpx.post(url + "api/show", json={"name": "qwen2.5-coder:1.5b"}, timeout=30).json()
    assert ".Suffix" in shown["template"]  # Continue's test for FIM support
    for line in shown["parameters"].split("\n"):  # Continue parses each line as `key value`
        assert len(line.split()) == 2
    assert "insert" in client.show("qwen2.5-coder:1.5b").capabilities
    assert [m.model for m in client.list().models] == ["tiny fim"]
    assert httpx.get(url + "api/version", timeout=10).json()["version"]


def test_continue_autocomplete_request_streams_lines_of_json(url):
    with httpx.stream("POST", url + "api/generate", json=CONTINUE, timeout=60) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert lines[-1]["done"] is True and "response" in lines[0]
    assert all(not line["done"] for line in lines[:-1])


def test_a_load_request_and_bad_fields(url):
    loaded = httpx.post(url + "api/generate", json={"model": "qwen2.5-coder:1.5b", "stream": False}, timeout=60).json()
    assert loaded["done"] and loaded["done_reason"] == "load"
    bad = httpx.post(
        url + "api/generate",
        json={"model": "m", "prompt": "x = ", "stream": False, "options": {"temperature": 9}},
        timeout=30,
    )
    assert bad.status_code == 400 and "temperature=9 is out of range" in bad.json()["error"]
    with pytest.raises(ollama.ResponseError):
        ollama.Client(host=url.rstrip("/")).generate(model="m", prompt="x = ", options={"num_predict": 0.5})


def test_a_load_request_for_a_model_that_cannot_load_is_ollamas_503():
    service = Service(EngineHub([ModelChoice("broken", "bundled:no-such-model")]), Pipeline(), LIMITS)
    demo = build_demo(service)
    address = launch_local(demo)
    mount_protocols(demo, service, [Ollama()])
    try:
        for body in ({"model": "broken"}, {"model": "broken", "prompt": "x = ", "stream": False}):
            answer = httpx.post(address + "api/generate", json=body, timeout=60)
            assert answer.status_code == 503 and "no-such-model" in answer.json()["error"]
    finally:
        demo.close()


def test_a_num_predict_past_the_apps_most_is_capped_not_refused(url):
    """Continue sends its maxTokens (4096 by default) as num_predict: served with the app's most, as Ollama would."""
    body = {**CONTINUE, "stream": False, "options": {**CONTINUE["options"], "num_predict": 4096}}
    answer = httpx.post(url + "api/generate", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    assert answer.json()["done"] and answer.json()["eval_count"] <= LIMITS.max_new_tokens
