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

import gradio as gr
from fastapi.responses import JSONResponse, StreamingResponse

from app.models import EngineHub
from app.requests import Defaults, Limits, build_checks, build_request, capped_tokens, stop_strings
from app.results import RunResult
from app.routes import final_or_error, in_protocol_names, json_handler, mount_first
from app.runs import USER_ERRORS, BusyError, RunControl
from app.service import Pipeline
from engine import InvalidRequest, ModelSetupError
from engine.remote import RemoteError
from engine.text.infill import split_fim_prompt
from engine.types import CUT_REASONS, FINISH_STOP


def protocol_finish(reason: str | None) -> str:
    """Our finish reason (engine.types.FINISH_REASONS) -> the protocol's: "length" for any text that was cut off."""
    return "length" if reason in CUT_REASONS else FINISH_STOP


def mount_completions(
    demo: gr.Blocks, hub: EngineHub, pipeline: Pipeline, limits: Limits = Limits(), defaults: Defaults = Defaults()
) -> None:
    """Add POST /v1/completions (and GET /v1/models) to a launched demo's server, ahead of Gradio's routes."""
    defaults = defaults.clipped(limits)
    handler = openai_handler(
        pipeline, hub, lambda body: _parse(body, hub, limits, defaults), _response, _events, "at least `prompt`"
    )

    def models():
        return {
            "object": "list",
            "data": [
                {"id": label, "object": "model", "owned_by": "ranked-drafts", "ranked_drafts": _model_info(hub, label)}
                for label in hub.labels
            ],
        }

    mount_first(demo, [("/v1/completions", handler, "POST"), ("/v1/models", models, "GET")])


def _model_info(hub: EngineHub, label: str) -> dict:
    """A menu entry's state and, once its models are loaded, the dtype and weight format each runs in, and why."""
    state, _ = hub.state(label)
    formats = hub.formats(label).items()
    return {
        "state": state,
        "formats": {spec: {"dtype": f.dtype, "weights": f.weights, "why": f.reason} for spec, f in formats},
    }


def openai_handler(pipeline: Pipeline, hub: EngineHub, parse, respond, events, needs: str):
    """A route in OpenAI's manner: `parse` a body into (model choice, GenerationRequest), read its checks in the
    request's language, run the pipeline, and answer with `respond(result, model)` as JSON, or with `stream` as the
    server-sent `events` of it; errors in OpenAI's shape. `needs` names what a body must hold."""

    def serve(body: dict, control: RunControl) -> JSONResponse | StreamingResponse:
        try:
            choice, request = parse(body)
            checks = build_checks(
                body.get("checks") or "", body.get("run_checks", True), request.language, body.get("search", True)
            )
        except USER_ERRORS as err:
            return error_response(400, protocol_names(str(err)), "invalid_request_error")
        final, error = final_or_error(pipeline, hub, choice, request, control, OPENAI_ERRORS, checks)
        if error is not None:
            return error_response(*error, headers={"Retry-After": "5"} if error[0] == 429 else None)
        response = respond(final, str(body.get("model") or choice.label))
        if body.get("stream"):
            return StreamingResponse(events(response), media_type="text/event-stream")
        return JSONResponse(response)

    return json_handler(serve, lambda status, message: error_response(status, message, "invalid_request_error"), needs)


def model_and_n(body: dict, hub: EngineHub, limits: Limits, defaults: Defaults):
    """(the model choice a body names: any name the app serves, others the default; its `n`, checked against the
    app's --max-k where it is an integer, else left for build_request to name)."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidRequest(f"model={model!r} is invalid: it must be a string")
    n = body.get("n", defaults.k)
    if isinstance(n, int) and not isinstance(n, bool) and not 1 <= n <= limits.max_k:
        raise InvalidRequest(f"n={n} is out of range: it must be an integer in 1..{limits.max_k} (the app's --max-k)")
    return hub.choice(model if model in hub.choices else None), n


def _parse(body: dict, hub: EngineHub, limits: Limits, defaults: Defaults):
    """(model choice, GenerationRequest) from an OpenAI completions body; InvalidRequest names the bad field."""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise InvalidRequest(f"prompt is a list of {len(prompt)}: send one prompt per request")
        prompt = prompt[0]
    choice, n = model_and_n(body, hub, limits, defaults)
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


OPENAI_ERRORS = [
    ((BusyError,), 429, "server_busy"),
    ((RemoteError,), 502, "upstream_error"),
    ((ModelSetupError,), 503, "server_error"),
]  # what the run raised -> status, error type
PROTOCOL_NAMES = {"k": "n", "max_new_tokens": "max_tokens"}  # /generate's field names -> this protocol's


def protocol_names(message: str) -> str:
    """A validation message with the field named as the caller sent it."""
    return in_protocol_names(message, PROTOCOL_NAMES)


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


def _events(response: dict):
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
