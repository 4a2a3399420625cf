"""Ranked drafts over Ollama's API, which Continue, Twinny and Zed use for local models (ollama/ollama docs/api.md).

- `POST /api/generate`: `prompt` (the code before the cursor) and `suffix` (after it: then a middle), `options`
  (`num_predict`: -1 or past the app's most, its most; `temperature`, `top_p`, `seed`, `stop`; `top_k`, `num_ctx`
  and the rest are accepted and not applied), `stream` (default true: lines of JSON, the text in `response`, then a
  last line with `done` true and the counts and durations in nanoseconds), an extra `language` (else recognised).
  One answer, as Ollama gives: the best-ranked of `n` candidates (an extra option, default 1). A request without a
  prompt loads the model (`done_reason` "load"), as Ollama's does.
- `GET /api/tags`, `POST /api/show` (its `template` names `.Suffix`, which Continue reads as "this model fills in
  the middle"), `GET /api/version`.
Any `model` name is served by the app's model of that label, or else its default (the editors' configurations name
Ollama's tags, such as qwen2.5-coder:1.5b). Errors are Ollama's shape: {"error": message}.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import gradio as gr
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.models import EngineHub
from app.requests import CheckRequest, Defaults, Limits, build_request, capped_tokens, stop_strings
from app.results import RunResult, Timings
from app.routes import final_or_error, json_handler, mount_first
from app.runs import USER_ERRORS, BusyError, RunControl, RunRegistry
from app.service import Pipeline
from engine import GenerationStats, InvalidRequest, ModelSetupError
from engine.remote import RemoteError
from engine.types import FINISH_STOP

VERSION = "0.6.5"  # the Ollama version whose API this follows (clients check it against their minimum)
OLLAMA_ERRORS = [((BusyError, RemoteError, ModelSetupError), 503, "unavailable")]
# What /api/show reports as the template: Qwen2.5-Coder's fill-in-the-middle layout, as Ollama's own model has it.
TEMPLATE = (
    "{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}<|fim_middle|>"
    "{{- else }}{{ .Prompt }}{{- end }}"
)


def mount_ollama(
    demo: gr.Blocks, hub: EngineHub, pipeline: Pipeline, limits: Limits = Limits(), defaults: Defaults = Defaults()
) -> None:
    """Add Ollama's /api/generate, /api/tags, /api/show and /api/version to a launched demo's server."""
    defaults = defaults.clipped(limits)

    def generate(body: dict, control: RunControl) -> Response:
        return _generate(body, control, hub, pipeline, limits, defaults)

    def show(body: dict, control: RunControl) -> Response:
        return _show(body, hub)

    def tags():
        return _tags(hub)

    def version():
        return {"version": VERSION}

    on_bad_body = lambda status, message: _error(status, message)  # noqa: E731
    generating = json_handler(generate, on_bad_body, "`model` and `prompt`", RunRegistry(), _client_session)
    mount_first(
        demo,
        [
            ("/api/generate", generating, "POST"),
            ("/api/show", json_handler(show, on_bad_body, "`model`"), "POST"),
            ("/api/tags", tags, "GET"),
            ("/api/version", version, "GET"),
        ],
    )


def _generate(
    body: dict, control: RunControl, hub: EngineHub, pipeline: Pipeline, limits: Limits, defaults: Defaults
) -> Response:
    """POST /api/generate: the best-ranked of n candidates, streamed as two lines or answered as one."""
    started = time.perf_counter()
    try:
        request, name, load_only = _parse(body, hub, limits, defaults)
    except USER_ERRORS as err:
        return _error(400, str(err))
    choice = hub.choice(name if name in hub.choices else None)
    if load_only:
        hub.engine(choice.label)
        return _answer(body, [_done(body, "", "load", None, started)])
    final, error = final_or_error(
        pipeline, hub, choice, request, control, OLLAMA_ERRORS, CheckRequest(run=request.k > 1, search=False)
    )
    if error is not None:
        return _error(error[0], error[1])
    best = final.candidates[0] if final.candidates else None
    code = "" if best is None else best.code + (f"\n{best.example_usage}" if best.example_usage else "")
    reason = "stop" if best is not None and best.finish_reason == FINISH_STOP else "length"
    return _answer(
        body,
        [_chunk(body, code), _done(body, "", reason, final, started)]
        if body.get("stream", True)
        else [_done(body, code, reason, final, started)],
    )


def _show(body: dict, hub: EngineHub) -> Response:
    """POST /api/show: the model's template (with `.Suffix`: it fills in the middle) and details."""
    name = body.get("model") or body.get("name") or hub.default_label
    return JSONResponse(
        {
            "modelfile": f'FROM {name}\nTEMPLATE """{TEMPLATE}"""\n',
            "parameters": "num_ctx 32768",
            "template": TEMPLATE,
            "details": _details(),
            "model_info": {"general.architecture": "qwen2"},
            "capabilities": ["completion", "insert"],
            "modified_at": _now(),
        }
    )


def _tags(hub: EngineHub) -> dict:
    """GET /api/tags: every model label the app serves."""
    return {
        "models": [
            {"name": label, "model": label, "modified_at": _now(), "size": 0, "digest": "", "details": _details()}
            for label in hub.labels
        ]
    }


def _client_session(body: dict, host: str) -> str | None:
    """A client's newer generation supersedes its running one (editors do not cancel); a load request does not."""
    return f"{host} {body.get('model')}" if body.get("prompt") or body.get("suffix") else None


def _parse(body: dict, hub: EngineHub, limits: Limits, defaults: Defaults):
    """(GenerationRequest, the model name asked for, whether the request only loads the model)."""
    name = body.get("model")
    if name is not None and not isinstance(name, str):
        raise InvalidRequest(f"model={name!r} is invalid: it must be a string")
    prompt, suffix = body.get("prompt") or "", body.get("suffix") or ""
    if not isinstance(prompt, str) or not isinstance(suffix, str):
        raise InvalidRequest("prompt and suffix must be strings")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise InvalidRequest(f"options={options!r} is invalid: it must be an object")
    options = {key: value for key, value in options.items() if value is not None}  # Continue sends nulls
    if not prompt and not suffix:
        return None, name, True
    n_predict = capped_tokens(options.get("num_predict", defaults.max_new_tokens), limits)
    seed = options.get("seed", -1)
    request = build_request(
        prompt,
        k=options.get("n", 1),
        budget_s=defaults.budget_s,
        temperature=options.get("temperature", defaults.temperature),
        max_new_tokens=n_predict,
        top_p=options.get("top_p", defaults.top_p),
        seed=seed,
        limits=limits,
        suffix=suffix,
        language=body.get("language"),
        stop=stop_strings(options.get("stop")),
    )
    return request, name, False


def _details() -> dict:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "qwen2",
        "families": ["qwen2"],
        "parameter_size": "1.5B",
        "quantization_level": "Q4_K_M",
    }


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _chunk(body: dict, text: str) -> dict:
    return {"model": body.get("model") or "", "created_at": _now(), "response": text, "done": False}


def _done(body: dict, text: str, reason: str, final: RunResult | None, started: float) -> dict:
    """The last object of an answer: done, why, and the counts and durations (nanoseconds) Ollama reports (none for
    a request that only loads the model)."""
    stats = final.engine_stats if final is not None else GenerationStats()
    timings = final.timings if final is not None else Timings()
    prompt_s = stats.prefill_s
    return {
        "model": body.get("model") or "",
        "created_at": _now(),
        "response": text,
        "done": True,
        "done_reason": reason,
        "context": [],
        "total_duration": int((time.perf_counter() - started) * 1e9),
        "load_duration": int((timings.load_s or 0.0) * 1e9),
        "prompt_eval_count": stats.prompt_tokens,
        "prompt_eval_duration": int(prompt_s * 1e9),
        "eval_count": stats.generated_tokens,
        "eval_duration": int(max(timings.generation_s - prompt_s, 0.0) * 1e9),
    }


def _answer(body: dict, objects: list[dict]) -> Response:
    if body.get("stream", True):
        return StreamingResponse(iter([json.dumps(o) + "\n" for o in objects]), media_type="application/x-ndjson")
    return JSONResponse(objects[-1])


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
