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

from fastapi.responses import JSONResponse, Response

from app.models import EngineHub
from app.requests import CheckRequest, Defaults, Limits, build_request, capped_tokens, stop_strings
from app.results import RunResult, Timings
from app.routes import Parsed, Protocol, json_handler
from app.runs import BusyError, RunControl
from app.serving import Service
from engine import GenerationStats, InvalidRequest, ModelSetupError
from engine.remote import RemoteError
from engine.types import FINISH_STOP

VERSION = "0.6.5"  # the Ollama version whose API this follows (clients check it against their minimum)
OLLAMA_ERRORS = (((BusyError, RemoteError, ModelSetupError), 503, "unavailable"),)
# What /api/show reports as the template: Qwen2.5-Coder's fill-in-the-middle layout, as Ollama's own model has it.
TEMPLATE = (
    "{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}<|fim_middle|>"
    "{{- else }}{{ .Prompt }}{{- end }}"
)


class Ollama(Protocol):
    """POST /api/generate: the best-ranked of n candidates, streamed as two lines or answered as one; /api/show,
    /api/tags and /api/version beside it."""

    path = "/api/generate"
    needs = "`model` and `prompt`"
    failures = OLLAMA_ERRORS
    streams_by_default = True
    stream_type = "application/x-ndjson"

    def parse(self, body: dict, service: Service) -> Parsed:
        started = time.perf_counter()
        request, name = _parse(body, service.limits, service.defaults)
        checks = CheckRequest(run=request is not None and request.k > 1, search=False)
        return Parsed(body, service.served(name), request, checks, started)

    def respond(self, final: RunResult | None, parsed: Parsed) -> dict:
        code, reason = _best(final)
        return _done(parsed.body, code, reason, final, parsed.detail)

    def stream(self, final: RunResult | None, parsed: Parsed) -> list[str]:
        code, reason = _best(final)
        done = _done(parsed.body, "", reason, final, parsed.detail)
        return [json.dumps(o) + "\n" for o in ([done] if final is None else [_chunk(parsed.body, code), done])]

    def error(self, status: int, message: str, kind: str, headers: dict | None = None) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    def session_of(self, body: dict, host: str) -> str | None:
        """A client's newer generation supersedes its running one (editors do not cancel); a load request does not."""
        return f"{host} {body.get('model')}" if body.get("prompt") or body.get("suffix") else None

    def routes(self, service: Service) -> list:
        def show(body: dict, control: RunControl) -> Response:
            return _show(body, service.hub)

        bad_body = lambda status, message: self.error(status, message, "invalid_request_error")  # noqa: E731
        return [
            ("/api/show", json_handler(show, bad_body, "`model`"), "POST"),
            ("/api/tags", lambda: _tags(service.hub), "GET"),
            ("/api/version", lambda: {"version": VERSION}, "GET"),
        ]


def _best(final: RunResult | None) -> tuple[str, str]:
    """(the best-ranked candidate's code with its example usage, Ollama's done_reason); a load-only request's
    ("", "load")."""
    if final is None:
        return "", "load"
    best = final.candidates[0] if final.candidates else None
    code = "" if best is None else best.code + (f"\n{best.example_usage}" if best.example_usage else "")
    return code, "stop" if best is not None and best.finish_reason == FINISH_STOP else "length"


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


def _parse(body: dict, limits: Limits, defaults: Defaults):
    """(GenerationRequest, the model name asked for); the request is None where the body only loads the model."""
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
        return None, name
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
    return request, name


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
