"""The /generate and /stop endpoints through the real gradio_client, against the app with tiny random models."""

from __future__ import annotations

import logging
import time

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError
from local_app import launch_local

from app.models import EngineHub, ModelChoice
from app.requests import Limits
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo
from engine import EngineSettings
from static_eval import AnalyzerSettings, StaticAnalyzer

PROMPT = 'def add(a, b):\n    """Return a + b."""\n'
FAST = dict(k=4, budget_s=3.0, temperature=0.8, max_new_tokens=12, top_p=0.95, seed=0)
# Greedy tiny:0 on LONG_PROMPT (a script, so no function body ends it) never emits a stop (measured: 2048 tokens,
# ~10 s), so this runs until it is stopped; sampled tiny models often stop within a second.
LONG_PROMPT = "total = 0\nfor i in range(10):\n"
LONG = dict(k=2, budget_s=20.0, temperature=0.0, max_new_tokens=2048, top_p=0.95, seed=1)


@pytest.fixture(scope="module")
def served():
    analyzer = StaticAnalyzer(AnalyzerSettings())
    # regular decoding: with drafts (prompt lookup on the greedy rows' repeats) LONG ran 2048 tokens in 1.6 s, so
    # a Stop sent after the first streamed tokens sometimes came after the end (seen before and after issue 19)
    hub = EngineHub(
        [
            ModelChoice("tiny pair", "tiny:0", "tiny:1"),
            ModelChoice("tiny alone", "tiny:2"),
            ModelChoice("tiny broken", "tiny:3"),
        ],
        settings=EngineSettings(drafter="none"),
    )
    demo = build_demo(
        Service(
            hub,
            Pipeline(analyzer=analyzer, idle_timeout_s=2.0),
            Limits(max_k=8, max_budget_s=20, max_new_tokens=2048),
        ),
        queue_size=3,
    )
    url = launch_local(demo)
    yield hub, url, Client(url, verbose=False)
    demo.close()
    analyzer.close()


def wait_for_tokens(job, timeout: float = 20.0) -> dict:
    """The first streamed state that carries generated tokens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outputs = job.outputs()
        if outputs and outputs[-1].get("progress", {}).get("generated_tokens", 0) > 0:
            return outputs[-1]
        time.sleep(0.05)
    outputs = job.outputs()
    raise AssertionError(f"no tokens streamed within {timeout} s: {job.status()}, last state {outputs[-1:]}")


def test_generate_returns_ranked_candidates(served):
    _, _, client = served
    result = client.predict(prompt=PROMPT, **FAST, model="tiny pair", api_name="/generate")

    assert result["status"] == "done" and result["stopped"] is None
    assert result["model"] == {"choice": "tiny pair", "target": "tiny:0", "draft": "tiny:1", "backend": "local"}
    assert result["ranking"]["available"] and result["static_analysis"]["available"]
    candidates = result["candidates"]
    assert [c["rank"] for c in candidates] == list(range(1, len(candidates) + 1))
    assert sorted(i for c in candidates for i in c["indices"]) == list(range(FAST["k"]))
    assert sum(c["count"] for c in candidates) == FAST["k"]
    tiers = [(c["demoted"], -c["score"]) for c in candidates]
    assert tiers == sorted(tiers), "ranks follow (parse tier, score)"
    for c in candidates:
        assert isinstance(c["code"], str)
        assert c["finish_reason"] in ("stop", "length", "budget")
        assert set(c["score_parts"]) == {
            "checks_passed",
            "consistency",
            "logprob_term",
            "static_penalty",
            "mean_logprob",
            "agreement",
            "stated_agreement",
            "ended",
        }
        assert all({"kind", "line", "message", "severity"} <= set(f) for f in c["findings"])
    matrix = result["similarity"]["matrix"]
    assert len(matrix) == len(candidates) and all(len(row) == len(candidates) for row in matrix)
    assert result["similarity"]["labels"] == [f"#{c['rank']}" for c in candidates]
    stats = result["stats"]
    for key in (
        "wall_s",
        "tokens_per_s",
        "acceptance_rate",
        "mean_draft_length",
        "generation_s",
        "analysis_s",
        "ranking_s",
        "total_s",
        "generated_tokens",
    ):
        assert key in stats
    assert stats["generation_s"] <= FAST["budget_s"] + 2.0


def test_defaults_apply_to_left_out_fields(served):
    _, _, client = served
    result = client.predict(PROMPT, 2, 2.0, api_name="/generate")  # positional; model etc. left out
    assert result["status"] == "done"
    assert result["request"]["k"] == 2 and result["request"]["max_new_tokens"] == 256
    assert result["model"]["choice"] == "tiny pair"


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"prompt": ""}, r"prompt is empty"),
        ({"prompt": "   \n"}, r"prompt is empty"),
        ({"prompt": "x" * 5000}, r"prompt is 5000 tokens.*context of 4096"),
        ({"k": 0}, r"k=0 is out of range.*1\.\.8"),
        ({"k": 99}, r"k=99 is out of range.*1\.\.8"),
        ({"k": 2.5}, r"k=2\.5 is out of range"),
        ({"budget_s": 0.5}, r"budget_s=0\.5 is out of range.*1\.\.20"),
        ({"budget_s": 500}, r"budget_s=500 is out of range.*1\.\.20"),
        ({"temperature": -1}, r"temperature=-1 is out of range"),
        ({"max_new_tokens": 0}, r"max_new_tokens=0 is out of range"),
        ({"model": "gpt-17"}, r"model='gpt-17' is not offered.*'tiny pair'"),
    ],
)
def test_bad_input_is_a_named_error_and_the_server_keeps_serving(served, changes, message):
    _, _, client = served
    fields = dict(prompt=PROMPT, **FAST, model="tiny pair") | changes
    with pytest.raises(AppError, match=message):
        client.predict(**fields, api_name="/generate")
    assert client.predict(prompt=PROMPT, **(FAST | {"k": 1, "budget_s": 1.0}), api_name="/generate")["status"] == "done"


def call_raw(url: str, body: bytes) -> tuple[int, str]:
    """POST a hand-made JSON body to /generate's REST route; (HTTP status, the event stream or error text).

    gradio_client cannot send what these tests need: it refuses to encode lone surrogates itself.
    """
    response = httpx.post(f"{url}gradio_api/call/generate", content=body, headers={"content-type": "application/json"})
    if response.status_code != 200:
        return response.status_code, response.text
    event_id = response.json()["event_id"]
    return 200, httpx.get(f"{url}gradio_api/call/generate/{event_id}", timeout=30).text


def test_non_utf8_input_is_refused_and_the_server_keeps_serving(served):
    _, url, client = served
    fields = '2, 2.0, 0.8, 8, 0.95, -1, "tiny pair", "", "", true, "auto", "auto", true'  # ... language, search
    status, events = call_raw(url, b'{"data": ["def f():\\n    x = \'\\ud800\'\\n", ' + fields.encode() + b"]}")
    assert status == 200 and "event: error" in events
    assert "prompt is not valid UTF-8 text: character 18 is" in events and "lone surrogate" in events
    status, text = call_raw(url, b'{"data": ["def f():\\n    x = \'\xff\xfe\'\\n", ' + fields.encode() + b"]}")
    assert status == 400, text  # not even JSON: refused before the queue
    status, events = call_raw(url, b'{"data": ["def f():\\n", ' + fields.encode() + b"]}")
    assert status == 200 and "event: complete" in events
    assert client.predict(prompt=PROMPT, **(FAST | {"k": 1, "budget_s": 1.0}), api_name="/generate")["status"] == "done"


def test_submit_streams_partial_results_then_the_ranking(served):
    _, _, client = served
    job = client.submit(prompt=LONG_PROMPT, **(LONG | {"budget_s": 2.0}), api_name="/generate")
    final = job.result(timeout=30)
    states = job.outputs()
    assert final["status"] == "done" and states[-1] == final
    partial = [s for s in states[:-1] if s["status"] == "generating"]
    assert partial, "progress states came before the result"
    assert all(c["rank"] is None for s in partial for c in s["candidates"])
    assert max(s["progress"]["generated_tokens"] for s in partial) > 0
    assert all(s["progress"]["budget_s"] == 2.0 for s in partial)


def test_stop_keeps_what_was_produced(served):
    hub, url, _ = served
    client = Client(url, verbose=False)
    job = client.submit(prompt=LONG_PROMPT, **LONG, api_name="/generate")
    wait_for_tokens(job)
    assert client.predict(api_name="/stop") is True
    result = job.result(timeout=15)
    assert result["stopped"] == "stopped by the user"
    assert result["stats"]["generation_s"] < LONG["budget_s"] - 5
    assert result["candidates"] and all(c["finish_reason"] in ("stop", "budget") for c in result["candidates"])
    assert sum(len(c["code"]) for c in result["candidates"]) > 0
    assert hub.generation_lock.acquire(blocking=False)  # free again
    hub.generation_lock.release()


def test_cancelled_client_frees_the_engine(served):
    _, url, client = served
    leaving = Client(url, verbose=False)
    job = leaving.submit(prompt=LONG_PROMPT, **LONG, api_name="/generate")
    wait_for_tokens(job)
    job.cancel()
    started = time.monotonic()
    result = client.predict(prompt=PROMPT, **(FAST | {"k": 1, "budget_s": 1.0}), api_name="/generate")
    waited = time.monotonic() - started
    assert result["status"] == "done"
    assert waited < LONG["budget_s"] - 5, f"the next request waited {waited:.1f} s: {result['stats']}"


def test_lazy_loading_of_another_choice(served):
    hub, _, client = served
    assert hub.state("tiny alone") == ("not loaded", "")
    result = client.predict(prompt=PROMPT, **FAST, model="tiny alone", api_name="/generate")
    assert hub.state("tiny alone")[0] == "ready"
    assert result["model"]["draft"] is None and result["status"] == "done"


def test_requests_beyond_the_queue_are_refused_as_busy(served):
    _, url, client = served
    clients = [Client(url, verbose=False) for _ in range(5)]
    jobs = [c.submit(prompt=LONG_PROMPT, **LONG, api_name="/generate") for c in clients]  # 1 runs, 3 wait, 1 refused
    refused = []
    for job in jobs:
        try:
            job.result(timeout=0.5)
        except Exception as err:  # noqa: BLE001 - we sort the outcomes below
            refused.append(err)
    for job in jobs:  # free the engine: waiting jobs leave the queue, the running one is stopped by its close
        job.cancel()
    assert any("Queue is full" in str(err) and "try again" in str(err) for err in refused), refused
    assert client.predict(prompt=PROMPT, **(FAST | {"k": 1, "budget_s": 1.0}), api_name="/generate")["status"] == "done"


def test_an_internal_failure_is_logged_and_shown_as_ours(served, caplog):
    """Regression (issue 10): an engine exception reached the user as a bare torch message ("expected sequence of
    length 27 at dim 1 (got 169)", a ValueError, so it looked like a range error) and nothing was logged."""
    hub, _, client = served

    def broken(module, args):
        raise ValueError("expected sequence of length 27 at dim 1 (got 169)")

    hub.engine("tiny broken").model.register_forward_pre_hook(broken)
    with caplog.at_level(logging.ERROR), pytest.raises(AppError) as failure:
        client.predict(prompt=PROMPT, **FAST, model="tiny broken", api_name="/generate")
    message = str(failure.value)
    assert "internal error" in message and "not of your input" in message and "expected sequence" in message
    error_id = message.split("internal error ")[1].split(":")[0]
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback is in the log, under the id shown
    assert client.predict(prompt=PROMPT, **FAST, model="tiny pair", api_name="/generate")["status"] == "done"


def test_the_pages_queue_polls_at_the_apps_pace_not_gradios_default():
    from app.ui import PROGRESS_POLL_S, QUEUE_POLL_S

    hub = EngineHub([ModelChoice("tiny alone", "tiny:2")])
    demo = build_demo(Service(hub, Pipeline()))
    queue = demo._queue  # Gradio's own 1 ms and 10 ms otherwise
    polls = (queue.sleep_when_free, queue.progress_update_sleep_when_free)
    assert polls == (QUEUE_POLL_S, PROGRESS_POLL_S) == (0.05, 0.1)
