"""The OpenAI protocol on both sides, with tiny models: our /v1/completions called by the official `openai` client, and
the remote candidate source (engine/remote.py) against real servers: the app itself, and a small HTTP server that
misbehaves on purpose (refusals, overload, a cut stream, malformed JSON) for the failures no healthy server shows."""

from __future__ import annotations

import http.server
import json
import threading
import time

import openai
import pytest
from local_app import free_port, launch_local

from app.models import EngineHub, ModelChoice, remote_menu
from app.openai_api import Completions
from app.requests import Limits
from app.routes import mount_protocols
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo
from engine import GenerationRequest
from engine.remote import RemoteClient, RemoteError, RemoteSettings
from engine.text.chat import CLOSING_FENCE, ChatForm
from engine.text.stopping import StopRules
from engine.types import FINISH_BUDGET, FINISH_INTERRUPTED, FINISH_STOP
from static_eval import AnalyzerSettings, StaticAnalyzer

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
SCRIPT = "total = 0\nfor i in range(10):\n"
LIMITS = Limits(max_k=6, max_budget_s=20, max_new_tokens=2048)


def serve(hub: EngineHub):
    analyzer = StaticAnalyzer(AnalyzerSettings(lint=False))
    pipeline = Pipeline(analyzer=analyzer)
    service = Service(hub, pipeline, LIMITS)
    demo = build_demo(service)
    url = launch_local(demo)
    mount_protocols(demo, service, [Completions()])
    return demo, analyzer, url


@pytest.fixture(scope="module")
def ours():
    demo, analyzer, url = serve(EngineHub([ModelChoice("tiny", "tiny:0", "tiny:1")]))
    yield url
    demo.close()
    analyzer.close()


@pytest.fixture(scope="module")
def client(ours):
    return openai.OpenAI(base_url=ours + "v1", api_key="unused", max_retries=0)


# --- our endpoint, through the official client ----------------------------------------------------------------
def test_choices_come_back_best_first_with_their_ranking(client):
    completion = client.completions.create(
        model="tiny", prompt=SCRIPT, n=5, max_tokens=12, temperature=0.9, seed=3, extra_body={"budget_s": 10}
    )
    assert len(completion.choices) == 5
    ranks = [c.model_extra["ranked_drafts"]["rank"] for c in completion.choices]
    assert ranks == sorted(ranks) and ranks[0] == 1
    assert [c.index for c in completion.choices] == list(range(5))
    first = completion.choices[0].model_extra["ranked_drafts"]
    assert {"score", "score_parts", "findings", "parses", "copies"} <= set(first)
    assert all(c.finish_reason in ("stop", "length") for c in completion.choices)
    assert completion.usage.completion_tokens > 0


def test_streaming_sends_the_ranked_choices(client):
    stream = client.completions.create(model="any name", prompt=SCRIPT, n=3, max_tokens=8, seed=1, stream=True)
    chunks = list(stream)
    assert [c.choices[0].index for c in chunks] == [0, 1, 2]
    assert chunks[0].choices[0].model_extra["ranked_drafts"]["rank"] == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"n": 7}, r"n=7 is out of range: it must be an integer in 1\.\.6 \(the app's --max-k\)"),
        ({"temperature": 5}, r"temperature=5 is out of range"),
        ({"max_tokens": 0}, r"max_tokens=0 is out of range"),
        ({"prompt": "   "}, r"prompt is empty"),
        ({"stop": 5}, r"stop=5 is invalid"),
        ({"model": ["x"]}, r"model=\['x'\] is invalid"),
    ],
)
def test_bad_fields_are_refused_in_openais_error_shape(client, fields, message):
    with pytest.raises(openai.BadRequestError, match=message) as refused:
        client.completions.create(**({"model": "tiny", "prompt": SCRIPT, "max_tokens": 4} | fields))
    assert refused.value.body["type"] == "invalid_request_error"


def test_a_client_that_disconnects_frees_the_engine(slow_down):
    """The first request could only end by its 20 s budget (every forward of its model takes 50 ms longer, so 2000
    tokens take far more); its client leaves after 1.5 s, and the next request is served at once."""
    import httpx

    hub = EngineHub([ModelChoice("tiny", "tiny:0")])
    slow_down(hub.engine("tiny").model, 0.05)
    demo, analyzer, url = serve(hub)
    try:
        body = {"prompt": SCRIPT, "n": 1, "temperature": 0.0, "budget_s": 20}
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "v1/completions", json=body | {"max_tokens": 2000}, timeout=1.5)
        started = time.monotonic()
        quick = httpx.post(url + "v1/completions", json=body | {"max_tokens": 4}, timeout=30)
        assert quick.status_code == 200 and time.monotonic() - started < 10  # not the 20 s the first one asked for
    finally:
        demo.close()
        analyzer.close()


# --- the remote candidate source ------------------------------------------------------------------------------
def test_remote_source_ranks_what_a_real_server_sends(ours):
    """The whole pipeline on candidates from a server: our app in front of our app, through the protocol."""
    demo, analyzer, url = serve(EngineHub(remote_menu(RemoteSettings(ours + "v1", "tiny")), concurrency=2))
    try:
        client = openai.OpenAI(base_url=url + "v1", api_key="unused", max_retries=0)
        completion = client.completions.create(model="x", prompt=SCRIPT, n=4, max_tokens=10, seed=2)
        assert len(completion.choices) == 4
        assert completion.choices[0].model_extra["ranked_drafts"]["rank"] == 1
    finally:
        demo.close()
        analyzer.close()


def test_function_body_stopping_applies_to_remote_text(ours):
    """One rule for local and remote rows: the text a server sends past the function's end is cut here."""
    server = Misbehaving(
        [
            _sse(
                [
                    {"index": 0, "text": "    return a + b\n"},
                    {"index": 0, "text": "print(add(1, 2))\n"},
                    {"index": 0, "text": "", "finish_reason": "length"},
                ]
            )
        ]
    )
    with server:
        result = RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=1, budget_s=10))
    candidate = result.candidates[0]
    assert candidate.text == "    return a + b\n" and candidate.finish_reason == FINISH_STOP


def test_rows_of_a_prompt_sent_in_another_form_end_by_the_rules_given():
    """bench_e2e's llama+chat sends the code in the chat form (the code twice): a bracket the code leaves open is
    open twice in that text, so the rows end by the code's rules, which the caller gives."""
    code = "def clamp(x, low, high):\n    return max(low, min("
    chat = ChatForm("<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n").prompt_text(code)
    sent = [
        {"index": 0, "text": "x, high))\n"},
        {"index": 0, "text": "print(clamp(1, 2, 3))\n"},
        {"index": 0, "text": "", "finish_reason": "length"},
    ]
    texts = []
    for rules in (StopRules.of(GenerationRequest(code), frozenset(), (CLOSING_FENCE,)), None):
        with Misbehaving([_sse(sent)]) as server:
            result = RemoteClient(RemoteSettings(server.url, "m")).generate(
                GenerationRequest(chat, k=1, budget_s=10), rules=rules
            )
        texts.append(result.candidates[0].text)
    assert texts == ["x, high))\n", "x, high))\nprint(clamp(1, 2, 3))\n"]  # the chat text's own rules miss the end


def test_choices_interleaved_by_index_fill_their_rows():
    chunks = [
        {"index": 1, "text": "    return b"},
        {"index": 0, "text": "    return a"},
        {"index": 1, "text": " + a\n", "finish_reason": "stop"},
        {"index": 0, "text": " + b\n", "finish_reason": "eos"},
    ]
    with Misbehaving([_sse(chunks)]) as server:
        result = RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=2, budget_s=10))
    assert [c.text for c in result.candidates] == ["    return a + b\n", "    return b + a\n"]
    assert [c.finish_reason for c in result.candidates] == [FINISH_STOP, FINISH_STOP]


def test_the_deadline_closes_the_stream_and_keeps_what_arrived():
    slow = _sse([{"index": 0, "text": "    x = 1\n"}], done=False) + [("sleep", 30)]
    with Misbehaving([slow]) as server:
        started = time.monotonic()
        result = RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=1, budget_s=1.0))
        waited = time.monotonic() - started
    assert waited < 3
    assert result.candidates[0].text == "    x = 1\n" and result.candidates[0].finish_reason == FINISH_BUDGET


def test_a_stream_cut_midway_keeps_what_arrived_and_marks_it():
    cut = _sse([{"index": 0, "text": "    y = 2\n"}], done=False) + [("close", 0)]
    with Misbehaving([cut]) as server:
        result = RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=1, budget_s=10))
    assert result.candidates[0].text == "    y = 2\n"
    assert result.candidates[0].finish_reason == FINISH_INTERRUPTED


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (401, {}, r"refused the request \(401\).*\(api_key\)"),
        (404, {}, r"does not serve model 'm'.*\(model\) and base_url"),
        (429, {"Retry-After": "7"}, r"overloaded \(429\); retry after 7 s"),
        (503, {}, r"overloaded \(503\); retry in a moment"),
    ],
)
def test_refusals_are_said_in_words_that_name_the_fix(status, headers, message):
    with Misbehaving([[("status", status, headers)]]) as server:
        with pytest.raises(RemoteError, match=message):
            RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=1, budget_s=10))


def test_a_server_that_ignores_n_is_named():
    one = _sse([{"index": 0, "text": "    return 1\n", "finish_reason": "stop"}])
    with Misbehaving([one]) as server:
        with pytest.raises(RemoteError, match="sent 1 of the 3 choices.*fan_out='requests'"):
            RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=3, budget_s=10))


@pytest.mark.parametrize("payload", [b"data: null\n\n", b"data: []\n\n", b'data: {"choices": [{"index": null}]}\n\n'])
def test_chunks_of_an_unknown_shape_are_named(payload):
    with Misbehaving([[("raw", payload)]]) as server:
        with pytest.raises(RemoteError, match="server at .* sent"):
            RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=1, budget_s=10))


def test_malformed_json_is_named():
    with Misbehaving([[("raw", b"data: {not json\n\n")]]) as server:
        with pytest.raises(RemoteError, match="malformed JSON"):
            RemoteClient(RemoteSettings(server.url, "m")).generate(GenerationRequest(PROMPT, k=1, budget_s=10))


def test_a_server_that_is_not_there_is_named():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RemoteError, match="no server answers at .*is it running"):
        RemoteClient(RemoteSettings(url, "m")).generate(GenerationRequest(PROMPT, k=1, budget_s=10))


def test_servers_without_n_get_k_requests():
    one = _sse([{"index": 0, "text": "    return 1\n", "finish_reason": "stop"}])
    with Misbehaving([one, one, one]) as server:
        engine = RemoteClient(RemoteSettings(server.url, "m", fan_out="requests"))
        result = engine.generate(GenerationRequest(PROMPT, k=3, budget_s=10, seed=5))
    assert [c.text for c in result.candidates] == ["    return 1\n"] * 3
    assert sorted(body["seed"] for body in server.bodies) == [5, 6, 7] and all("n" not in b for b in server.bodies)


# --- a server that misbehaves on purpose ------------------------------------------------------------------------
def _sse(choices: list[dict], done: bool = True) -> list[tuple]:
    steps = [("raw", f"data: {json.dumps({'choices': [c]})}\n\n".encode()) for c in choices]
    return steps + ([("raw", b"data: [DONE]\n\n")] if done else [])


class Misbehaving:
    """A real HTTP server on loopback that answers each POST with the next scripted response: ("status", code,
    headers) for a refusal, else a 200 event stream of ("raw", bytes), ("sleep", s) and ("close", 0) steps."""

    def __init__(self, scripts: list[list[tuple]]):
        self.scripts, self.bodies, self._lock = list(scripts), [], threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.bodies.append(body)
                    script = outer.scripts.pop(0)
                if script[0][0] == "status":
                    _, code, headers = script[0]
                    payload = json.dumps({"error": {"message": "scripted refusal"}}).encode()
                    self.send_response(code)
                    for name, value in {"Content-Length": str(len(payload)), **headers}.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for kind, value in script:
                    if kind == "raw":
                        self.wfile.write(value)
                        self.wfile.flush()
                    elif kind == "sleep":
                        time.sleep(value)
                    elif kind == "close":
                        self.connection.shutdown(2)
                        return
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
