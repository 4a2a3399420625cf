"""The protocol seam (app/routes.py): a new protocol is a Protocol subclass (parse, respond, stream, error) mounted by
mount_protocols on a Service, here a small one written for the test, on a real Gradio server and a tiny model."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi.responses import JSONResponse
from local_app import launch_local

from app.models import EngineHub, ModelChoice
from app.requests import CheckRequest, Limits, build_request
from app.routes import Parsed, Protocol, mount_protocols
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo
from engine import ModelSetupError

LIMITS = Limits(max_k=4, max_budget_s=20, max_new_tokens=64)
PROMPT = 'def add(a, b):\n    """Return a + b."""\n'


class Echo(Protocol):
    """A protocol of our own: {"code", "n", "model"} in; the ranked codes out, or one line per code streamed."""

    path = "/echo"
    needs = "`code`"
    failures = (((ModelSetupError,), 503, "unavailable"),)
    names = {"k": "n"}
    retry_after = (503, "7")
    stream_type = "application/x-ndjson"

    def parse(self, body: dict, service: Service) -> Parsed:
        if body.get("crash"):
            raise KeyError("a failure of the protocol's own code")
        if body.get("load_only"):
            return Parsed(body, service.served(body.get("model")), None)
        request = build_request(
            body.get("code"),
            k=body.get("n", 1),
            budget_s=10,
            max_new_tokens=16,
            temperature=0.8,
            top_p=0.95,
            seed=3,
            limits=service.limits,
        )
        return Parsed(body, service.served(body.get("model")), request, CheckRequest(run=False), "echoed")

    def respond(self, final, parsed: Parsed) -> dict:
        if final is None:
            return {"loaded": parsed.choice.label}
        return {
            "codes": [c.code for c in final.ranked_copies()],
            "detail": parsed.detail,
            "model": final.model["choice"],
        }

    def stream(self, final, parsed: Parsed) -> list[str]:
        return [json.dumps({"code": code}) + "\n" for code in self.respond(final, parsed)["codes"]]

    def error(self, status: int, message: str, kind: str, headers: dict | None = None) -> JSONResponse:
        return JSONResponse({"problem": message, "kind": kind}, status_code=status, headers=headers)


@pytest.fixture(scope="module")
def url():
    hub = EngineHub([ModelChoice("tiny", "tiny:0"), ModelChoice("other", "tiny:1")])
    service = Service(hub, Pipeline(), LIMITS)
    demo = build_demo(service)
    address = launch_local(demo)
    mount_protocols(demo, service, [Echo()])
    broken = Service(EngineHub([ModelChoice("broken", "bundled:no-such-model")]), Pipeline(), LIMITS)
    other = build_demo(broken)
    broken_address = launch_local(other)
    mount_protocols(other, broken, [Echo()])
    yield address, broken_address
    demo.close()
    other.close()


def test_a_mounted_protocol_parses_runs_and_answers_in_its_own_shape(url):
    answer = httpx.post(url[0] + "echo", json={"code": PROMPT, "n": 2, "model": "an editor's own name"}, timeout=60)
    assert answer.status_code == 200
    body = answer.json()
    assert len(body["codes"]) == 2 and body["detail"] == "echoed"
    assert body["model"] == "tiny"  # a name the app does not serve: the default model


def test_a_stream_is_the_protocols_own_lines_in_its_media_type(url):
    answer = httpx.post(url[0] + "echo", json={"code": PROMPT, "n": 2, "stream": True}, timeout=60)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert len(lines) == 2 and all("code" in line for line in lines)


def test_a_bad_field_is_a_400_in_the_protocols_shape_and_names(url):
    answer = httpx.post(url[0] + "echo", json={"code": PROMPT, "n": 0}, timeout=30)
    assert answer.status_code == 400
    body = answer.json()
    assert body["kind"] == "invalid_request_error" and body["problem"].startswith("n=0")  # k named as the protocol


def test_a_body_that_is_not_json_names_what_it_needs(url):
    answer = httpx.post(url[0] + "echo", content=b"not json", timeout=30)
    assert answer.status_code == 400 and "`code`" in answer.json()["problem"]


def test_a_request_that_runs_nothing_only_loads_the_model(url):
    answer = httpx.post(url[0] + "echo", json={"load_only": True, "model": "other"}, timeout=60)
    assert answer.status_code == 200 and answer.json() == {"loaded": "other"}


def test_a_failed_run_is_the_protocols_status_kind_and_retry_after(url):
    for body in ({"code": PROMPT}, {"load_only": True}):
        answer = httpx.post(url[1] + "echo", json=body, timeout=60)
        assert answer.status_code == 503 and answer.headers["retry-after"] == "7"
        assert answer.json()["kind"] == "unavailable" and "no-such-model" in answer.json()["problem"]


def test_a_failure_of_the_protocols_own_code_is_a_500_of_ours_with_the_logged_id(url):
    answer = httpx.post(url[0] + "echo", json={"crash": True}, timeout=30)
    assert answer.status_code == 500 and answer.json()["kind"] == "server_error"
    assert "internal error" in answer.json()["problem"].lower()
