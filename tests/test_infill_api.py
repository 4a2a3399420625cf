"""POST /infill with the request bodies llama.vim and llama.vscode send (read from their sources: llama.vim
a1c8e6e4 autoload/llama.vim, llama.vscode 0.0.63 src/llama-server.ts), and OpenAI `suffix` / FIM-marked prompts, on a
tiny FIM model through the real server."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse

import httpx
import openai
import pytest
from local_app import launch_local

from app.infill_api import Infill
from app.models import EngineHub, ModelChoice
from app.openai_api import Completions
from app.requests import Limits
from app.routes import mount_protocols
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo
from static_eval import AnalyzerSettings, StaticAnalyzer

LIMITS = Limits(max_k=6, max_budget_s=20, max_new_tokens=256)
PREFIX = (
    'import math\n\n\ndef area(radius):\n    """Return the area of a circle."""\n    return math.pi * radius ** 2'
    "\n\n\ndef circumference(radius):\n"
)
SUFFIX = '\n\n\nif __name__ == "__main__":\n    print(area(1.0), circumference(1.0))\n'
EXTRA = [
    {
        "text": "TAU = 6.283185307179586\nGOLDEN = 1.618033988749895\n",
        "time": [1738312345, 123456],
        "filename": "geometry/constants.py",
    }
]
FIELDS = [
    "content",
    "timings/prompt_n",
    "timings/prompt_ms",
    "timings/prompt_per_token_ms",
    "timings/prompt_per_second",
    "timings/predicted_n",
    "timings/predicted_ms",
    "timings/predicted_per_token_ms",
    "timings/predicted_per_second",
    "truncated",
    "tokens_cached",
]
LLAMA_VIM = {
    "id_slot": 0,
    "input_prefix": PREFIX,
    "input_suffix": SUFFIX,
    "input_extra": EXTRA,
    "prompt": "    return 2 * math.pi",
    "n_predict": 128,
    "stop": [],
    "n_indent": 4,
    "top_k": 40,
    "top_p": 0.9,
    "samplers": ["top_k", "top_p", "infill"],
    "stream": False,
    "cache_prompt": True,
    "t_max_prompt_ms": 500,
    "t_max_predict_ms": 250,
    "response_fields": FIELDS,
    "model": "",
}
LLAMA_VIM_WARM_UP = {
    "id_slot": 0,
    "input_prefix": "",
    "input_suffix": "",
    "input_extra": EXTRA,
    "prompt": "",
    "n_predict": 0,
    "temperature": 0.0,
    "samplers": [],
    "stream": False,
    "cache_prompt": True,
    "t_max_prompt_ms": 1,
    "t_max_predict_ms": 1,
    "response_fields": [""],
    "model": "",
}
LLAMA_VSCODE = {
    "id_slot": 0,
    "input_prefix": PREFIX,
    "input_suffix": SUFFIX,
    "input_extra": [dict(EXTRA[0], time=1738312345123, filename="/home/user/proj/geometry/constants.py")],
    "prompt": "    return 2 * math.pi",
    "n_predict": 128,
    "n_cmpl": 3,
    "top_k": 40,
    "top_p": 0.99,
    "stream": False,
    "samplers": ["top_k", "top_p", "infill"],
    "cache_prompt": True,
    "n_indent": 4,
    "t_max_prompt_ms": 500,
    "t_max_predict_ms": 500,
    "model": "google/gemini-2.5-flash",
}


@pytest.fixture(scope="module")
def server():
    hub = EngineHub([ModelChoice("tiny fim", "tiny:0:fim", "tiny:1:fim")])
    analyzer = StaticAnalyzer(AnalyzerSettings(lint=False))
    pipeline = Pipeline(analyzer=analyzer)
    service = Service(hub, pipeline, LIMITS)
    demo = build_demo(service)
    url = launch_local(demo)
    mount_protocols(demo, service, [Completions(), Infill()])
    yield url
    demo.close()
    analyzer.close()


def post(url: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(
        url + "infill",
        content=json.dumps(body),
        timeout=60,
        headers={"Content-Type": "application/json"} | (headers or {}),
    )


def post_as_curl(url: str, body: dict) -> tuple[int, str]:
    """As llama.vim's curl sends it: `Authorization: Bearer ` with an empty key (httpx refuses to send that header)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request(
        "POST", "/infill", json.dumps(body), {"Content-Type": "application/json", "Authorization": "Bearer "}
    )
    response = connection.getresponse()
    return response.status, response.read().decode()


def test_llama_vim_gets_one_ranked_middle_in_the_shape_it_reads(server):
    status, text = post_as_curl(server, LLAMA_VIM_WARM_UP)
    assert status == 200 and json.loads(text) == {}
    status, text = post_as_curl(server, LLAMA_VIM)
    assert status == 200
    assert re.match(r"^\s*{", text) and re.search(r'"content"\s*:"', text)  # llama.vim's own test of an answer
    result = json.loads(text)
    assert set(result) == set(FIELDS)  # flat "timings/prompt_n" keys, as asked
    assert isinstance(result["content"], str) and result["timings/prompt_n"] > 0


def test_llama_vscode_gets_its_alternatives_best_first(server):
    post(server, LLAMA_VSCODE)
    answer = post(server, LLAMA_VSCODE)  # the same request again, as the next keystroke nearly is
    assert answer.status_code == 200
    results = answer.json()
    assert isinstance(results, list) and len(results) == 3
    ranks = [r["ranked_drafts"]["rank"] for r in results]
    assert ranks == sorted(ranks) and ranks[0] == 1
    for result in results:
        assert isinstance(result["content"], str) and result["stop"] is True
        timings = result["timings"]
        assert timings["prompt_n"] == 0 and timings["cache_n"] > 0  # the same request: all of it from the cache
        assert result["tokens_evaluated"] == timings["cache_n"] + timings["prompt_n"]
    single = post(server, dict(LLAMA_VSCODE, n_cmpl=1)).json()
    assert isinstance(single, dict) and "n_ctx" in single["generation_settings"]  # its status bar reads it


def test_bad_values_are_a_400_in_llama_cpp_shape(server):
    answer = post(server, dict(LLAMA_VSCODE, n_cmpl=7))
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith("Field 'n_cmpl': Value must be between 1 <= value <= 6")
    assert post(server, dict(LLAMA_VIM, input_prefix=3)).status_code == 400
    assert post(server, dict(LLAMA_VIM, input_extra=[{"filename": "x"}])).status_code == 400


def test_openai_suffix_and_a_fim_marked_prompt_are_middles(server):
    client = openai.OpenAI(base_url=server + "v1", api_key="unused", max_retries=0)
    with_suffix = client.completions.create(
        model="any", prompt=PREFIX, suffix=SUFFIX, n=2, max_tokens=8, seed=4, temperature=0.9
    )
    marked = client.completions.create(
        model="any",
        prompt=f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
        n=2,
        max_tokens=8,
        seed=4,
        temperature=0.9,
    )
    assert [c.text for c in with_suffix.choices] == [c.text for c in marked.choices]  # the same request, read twice
    stats = with_suffix.model_extra["ranked_drafts"]["stats"]
    assert stats["prompt_tokens"] > len(PREFIX) + len(SUFFIX)  # the FIM markers are in the prompt


def test_greedy_alternatives_and_streams_come_in_llama_cpps_shape(server):
    greedy = post(server, dict(LLAMA_VSCODE, temperature=0, n_cmpl=2)).json()
    assert isinstance(greedy, list) and len(greedy) == 2 and greedy[0]["content"] == greedy[1]["content"]
    streamed = httpx.post(server + "infill", json=dict(LLAMA_VSCODE, stream=True), timeout=60)
    events = [json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")]
    assert len(events) == 3 and [e["index"] for e in events] == [0, 1, 2] and all(e["stop"] for e in events)
    capped = post(server, dict(LLAMA_VIM, n_predict=5000))  # past the app's most: its most, as llama-server's -n
    answer = capped.json()
    assert capped.status_code == 200 and answer["timings/predicted_n"] <= LIMITS.max_new_tokens + 1  # + the healed


def test_a_newer_request_of_the_same_editor_supersedes_the_running_one(server):
    """llama.vim waits for the request in flight rather than cancelling it: the app stops it when the same editor
    sends its next one, so the new suggestion does not wait for a stale one."""
    import threading
    import time

    slow = dict(
        LLAMA_VIM,
        n_predict=256,
        n_cmpl=6,
        t_max_predict_ms=15000,
        temperature=1.0,
        n_indent=0,
        response_fields=None,
        input_extra=[{"filename": "big.py", "text": "VALUE = 12345\n" * 290}],
    )
    answers = {}

    def first():
        answers["first"] = post(server, slow).json()
        answers["first_done"] = time.monotonic()

    thread = threading.Thread(target=first)
    thread.start()
    time.sleep(0.3)  # the first is reading its 4k-token prompt, or generating
    sent = time.monotonic()
    second = post(server, dict(slow, n_predict=4, input_extra=[]))
    thread.join(timeout=60)
    assert second.status_code == 200 and all("stopped" not in r for r in second.json())
    assert isinstance(answers["first"], list), answers["first"]
    first_answer = answers["first"][0]
    assert "replaced by a newer request" in first_answer["stopped"], first_answer["timings"]
    assert answers["first_done"] - sent < 5.0
