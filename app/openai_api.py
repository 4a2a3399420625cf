"""Ranked drafts over the OpenAI completions protocol: `POST /v1/completions` on the app's own server.

`n` is k; the choices come back best first, after static analysis and reranking, each with its rank, score, score
parts and findings in an extra `ranked_drafts` field; `stream` sends the ranked choices as server-sent events once the
ranking is done; `max_tokens` past the app's most is capped to it, as llama-server caps; extra fields `budget_s`,
`stop_at_body_end` (default true), `language` (the code's language: else recognised), `mode` ("auto", "code" or
"words": a request in words gets answers, their code blocks ranked), `checks` (assert lines, as text or a list, run on
every candidate in the sandbox beside the prompt's own examples), `run_checks` (default true) and `search` (default
true: where no candidate passes every check, more are drawn while the budget lasts, the best `n` returned) are
honoured.
A client that disconnects stops its run. Errors use OpenAI's error shape with the same messages as /generate.
Editors that speak this protocol (and the official `openai` client) get ranked candidates without knowing about Gradio.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

from fastapi.responses import JSONResponse

from app.models import EngineHub
from app.requests import CheckRequest, build_checks, build_request, capped_tokens, stop_strings
from app.results import RunResult
from app.routes import Parsed, Protocol
from app.runs import BusyError
from app.serving import Service
from engine import GenerationRequest, InvalidRequest, ModelSetupError
from engine.remote import RemoteError
from engine.text.infill import split_fim_prompt
from engine.types import CUT_REASONS, FINISH_STOP


def protocol_finish(reason: str | None) -> str:
    """Our finish reason (engine.types.FINISH_REASONS) -> the protocol's: "length" for any text that was cut off."""
    return "length" if reason in CUT_REASONS else FINISH_STOP


def _model_info(hub: EngineHub, label: str) -> dict:
    """A menu entry's state and, once its models are loaded, the dtype and weight format each runs in, and why."""
    state, _ = hub.state(label)
    formats = hub.formats(label).items()
    return {
        "state": state,
        "formats": {spec: {"dtype": f.dtype, "weights": f.weights, "why": f.reason} for spec, f in formats},
    }


def request_checks(body: dict, request: GenerationRequest) -> CheckRequest:
    """The checks an OpenAI body asks for (`checks`, `run_checks`, `search`), read in the request's language."""
    return build_checks(
        body.get("checks") or "", body.get("run_checks", True), request.language, body.get("search", True)
    )


def model_and_n(body: dict, service: Service):
    """(the model choice a body names: any name the app serves, others the default; its `n`, checked against the
    app's --max-k where it is an integer, else left for build_request to name)."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidRequest(f"model={model!r} is invalid: it must be a string")
    n = body.get("n", service.defaults.k)
    max_k = service.limits.max_k
    if isinstance(n, int) and not isinstance(n, bool) and not 1 <= n <= max_k:
        raise InvalidRequest(f"n={n} is out of range: it must be an integer in 1..{max_k} (the app's --max-k)")
    return service.served(model), n


def _parse(body: dict, service: Service):
    """(model choice, GenerationRequest) from an OpenAI completions body; InvalidRequest names the bad field."""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise InvalidRequest(f"prompt is a list of {len(prompt)}: send one prompt per request")
        prompt = prompt[0]
    choice, n = model_and_n(body, service)
    limits, defaults = service.limits, service.defaults
    stop = stop_strings(body.get("stop"))
    body_end = body.get("stop_at_body_end", True)
    if not isinstance(body_end, bool):
        raise InvalidRequest(f"stop_at_body_end={body_end!r} is invalid: it must be true or false")
    suffix, extra = body.get("suffix") or "", ()
    if isinstance(prompt, str) and (split := split_fim_prompt(prompt)) is not None:  # Continue's FIM template
        if suffix:
            raise InvalidRequest("prompt holds fill-in-the-middle markers and suffix is set too: send one of them")
        prompt, suffix, extra = split
    request = build_request(
        prompt,
        k=n,
        budget_s=body.get("budget_s", defaults.budget_s),
        temperature=body.get("temperature", defaults.temperature),
        max_new_tokens=capped_tokens(body.get("max_tokens", defaults.max_new_tokens), limits),
        top_p=body.get("top_p", defaults.top_p),
        seed=body.get("seed"),
        limits=limits,
        suffix=suffix,
        extra=extra,
        mode=body.get("mode", "auto"),
        language=body.get("language"),
        stop=stop,
        stop_at_body_end=body_end,
    )
    return choice, request


def _response(final: RunResult, model: str) -> dict:
    """The protocol's completion object: one choice per candidate (copies of one text side by side), best first."""
    choices = [
        {
            "index": index,
            "text": entry.code,
            "logprobs": None,
            "finish_reason": protocol_finish(entry.finish_reason),
            "ranked_drafts": entry.ranking(),
        }
        for index, entry in enumerate(final.ranked_copies())
    ]
    tokens = final.engine_stats.generated_tokens
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens},
        "ranked_drafts": final.summary(),
    }


def _events(response: dict) -> Iterator[str]:
    """The ranked choices as server-sent events (one chunk per choice, best first), then [DONE]."""
    for choice in response["choices"]:
        chunk = {key: response[key] for key in ("id", "object", "created", "model")}
        chunk["choices"] = [choice]
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def error_response(status: int, message: str, kind: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status_code=status, headers=headers
    )


class Completions(Protocol):
    """POST /v1/completions, and GET /v1/models beside it."""

    path = "/v1/completions"
    needs = "at least `prompt`"
    failures = (
        ((BusyError,), 429, "server_busy"),
        ((RemoteError,), 502, "upstream_error"),
        ((ModelSetupError,), 503, "server_error"),
    )
    names = {"k": "n", "max_new_tokens": "max_tokens"}
    retry_after = (429, "5")

    def parse(self, body: dict, service: Service) -> Parsed:
        choice, request = self.read(body, service)
        return Parsed(body, choice, request, request_checks(body, request))

    def respond(self, final: RunResult, parsed: Parsed) -> dict:
        return self.answer(final, str(parsed.body.get("model") or parsed.choice.label))

    def stream(self, final: RunResult, parsed: Parsed) -> Iterator[str]:
        return self.events(self.respond(final, parsed))

    # what /v1/chat/completions reads and answers in its own shapes
    read = staticmethod(_parse)  # (body, service) -> (model choice, GenerationRequest)
    answer = staticmethod(_response)  # (result, model name) -> the protocol's answer
    events = staticmethod(_events)  # the answer -> its server-sent events

    def error(self, status: int, message: str, kind: str, headers: dict | None = None) -> JSONResponse:
        return error_response(status, message, kind, headers)

    def routes(self, service: Service) -> list:
        hub = service.hub

        def models():
            entries = [{"id": name, "object": "model", "owned_by": "ranked-drafts"} for name in hub.labels]
            return {
                "object": "list",
                "data": [entry | {"ranked_drafts": _model_info(hub, entry["id"])} for entry in entries],
            }

        return [("/v1/models", models, "GET")]
