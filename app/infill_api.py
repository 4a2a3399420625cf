"""Ranked middles over llama.cpp's `POST /infill`, the protocol of the editor plugins llama.vim and llama.vscode.

Fields as llama.cpp's server reads them (tools/server: server-context.cpp, server-common.cpp' format_infill):
- `input_prefix`, `input_suffix`, `prompt` (the cursor line's text before the cursor, read after the prefix);
  the local context is bounded within LOCAL_CONTEXT_TOKENS: the prefix's last 3/4, as llama-server bounds it by its
  batch, and the suffix's first 1/8 (whole lines; llama-server's 1/4 was measured right less often);
- `input_extra` ([{filename, text}]): other files before the current one, at most EXTRA_CONTEXT_TOKENS of them, the
  ones nearest the end kept (llama.cpp keeps the end of its extra context);
- `n_predict` (0: only read the prompt into the cache, as the plugins' warm-up requests ask; -1 or more than the
  app's most: its most, as llama-server caps it by its own `-n`),
  `n_cmpl` (alternatives, alias `n`), `temperature`, `top_p`, `seed`, `stop`;
- `t_max_predict_ms`: the time limit of generation, counted once the prompt is read; past it a row ends at the
  next newline it writes, so that the plugin always gets whole lines (llama.cpp stops "upon another new line");
- `n_indent`: a row ends before a new line indented less than this many columns (llama.cpp cuts that line);
- `response_fields`, `stream` (one event per result, no [DONE]);
- extra fields `language` and `filename` name the code's language (else it is recognised from the prefix).
Differences: `top_k`, `min_p` and `samplers` are accepted and not applied (the engine samples with temperature and
top-p, which the ranking's agreement relies on); `t_max_prompt_ms` is accepted and ignored, as llama.cpp does
(a TODO there); `cache_prompt` is always on (the prefix cache is exact, so it changes no answer); `id_slot` and
`model` are accepted and ignored. The answer is llama.cpp's: one object for one result, an array of them for
`n_cmpl` > 1, here best first, each with an extra `ranked_drafts` field (rank, score, findings); `timings` count
the prompt tokens computed (`prompt_n`) apart from those the prefix cache gave (`cache_n`). JSON is compact
(llama.vim's reader expects no space after a colon). Errors are llama.cpp's shape: {"error": {"code", "message",
"type"}}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fastapi.responses import Response

from app.requests import SINGLE_CHOICES, CheckRequest, Defaults, Limits, build_request, capped_tokens, stop_strings
from app.results import RunResult
from app.routes import Parsed, Protocol
from app.runs import BusyError
from app.serving import Service
from engine import EDITOR_DEADLINE, ContextFile, Deadline, InvalidRequest, ModelSetupError
from engine.remote import RemoteError
from engine.types import FINISH_BUDGET, FINISH_LENGTH, FINISH_STOP

# The prompt a middle reads: the prefix's last 768 tokens, as llama-server bounds it with the batch size llama.vim
# recommends (-b 1024), the suffix's first 128 (llama-server takes 256; see engine/text/infill.py SUFFIX_SHARE), whole
# lines, and at most 4096 tokens of other files (n_ctx - n_batch - 2 n_predict at the plugins' n_predict 128 and a
# context of about 5.4k), the nearest the end.
LOCAL_CONTEXT_TOKENS = 1024
EXTRA_CONTEXT_TOKENS = 4096
# what the run raised -> llama.cpp's status and error type (busy, a server or model that cannot serve: unavailable)
LLAMA_ERRORS = (((BusyError, RemoteError, ModelSetupError), 503, "unavailable_error"),)
# /generate's field names -> llama.cpp's, in validation messages
PROTOCOL_NAMES = {"k": "n_cmpl", "max_new_tokens": "n_predict", "prompt": "input_prefix", "suffix": "input_suffix"}
# our finish reasons -> llama.cpp's stop_type (a budget cut is its time limit, "limit" too)
STOP_TYPES = {FINISH_STOP: "eos", FINISH_LENGTH: "limit", FINISH_BUDGET: "limit"}


RANKED_K = 4  # candidates behind the one suggestion of --infill-single ranked


@dataclass(frozen=True)
class Infill(Protocol):
    """POST /infill. `single`: what a request that names neither n_cmpl nor temperature (llama.vim's default) gets:
    the greedy middle, or the best of RANKED_K sampled ones."""

    single: str = "greedy"
    path = "/infill"
    needs = "input_prefix and input_suffix"
    failures = LLAMA_ERRORS
    names = PROTOCOL_NAMES
    retry_after = (503, "1")

    def __post_init__(self) -> None:
        if self.single not in SINGLE_CHOICES:
            raise ValueError(f"single={self.single!r} is unknown: choose one of {', '.join(SINGLE_CHOICES)}")

    def parse(self, body: dict, service: Service) -> Parsed:
        asked, results_wanted = _with_single_default(body, self.single, service.limits)
        request, warm_up, n = _parse(asked, service.limits, service.defaults)
        # an editor's one suggestion has nothing to be ranked against: its examples run only when several are asked for
        checks = CheckRequest(run=request.k > 1, search=False)
        return Parsed(body, service.served(None), request, checks, (warm_up, min(n, results_wanted or n)))

    def respond(self, final: RunResult, parsed: Parsed) -> Response:
        results = self._answered(final, parsed)
        return Response(_compact(results[0] if len(results) == 1 else results), media_type="application/json")

    def stream(self, final: RunResult, parsed: Parsed) -> list[str]:
        return [f"data: {_compact(r)}\n\n" for r in self._answered(final, parsed)]  # one event per result, no [DONE]

    def error(self, status: int, message: str, kind: str, headers: dict | None = None) -> Response:
        return _error(status, message, kind, headers)

    def session_of(self, body: dict, host: str) -> str | None:
        return editor_session(body, host)

    @staticmethod
    def _answered(final: RunResult, parsed: Parsed) -> list[dict]:
        """llama.cpp's result objects for the run, n of them (greedy: one answer, n copies), `response_fields` only."""
        warm_up, n = parsed.detail
        results = _results(final, parsed.request, parsed.choice.label, warm_up)
        if final.stopped:  # superseded by this editor's newer request, or the client left: say so
            results = [dict(r, stopped=final.stopped) for r in results]
        results = [dict(results[i % len(results)], index=i) for i in range(n)]
        fields = parsed.body.get("response_fields")
        if isinstance(fields, list) and fields:
            results = [_only(result, fields) for result in results]
        return results


def _with_single_default(body: dict, single: str, limits: Limits) -> tuple[dict, int | None]:
    """(the body to serve, how many results to answer with; None: as it asks). A body that asks for one suggestion
    without saying how (no n_cmpl, n or temperature) gets the greedy middle, or the best of RANKED_K samples."""
    if any(name in body for name in ("n_cmpl", "n", "temperature")):
        return body, None
    if single == "greedy":
        return dict(body, temperature=0.0), None
    return dict(body, n_cmpl=min(RANKED_K, limits.max_k)), 1


def editor_session(body: dict, host: str) -> str | None:
    """The editor a request comes from (its address and slot): its newer request supersedes its running one (the
    plugins wait for the request in flight instead of cancelling it). Warm-ups (n_predict 0) supersede nothing."""
    if body.get("n_predict") == 0:
        return None
    return f"{host} slot {body.get('id_slot', -1)}"


def _parse(body: dict, limits: Limits, defaults: Defaults):
    """(GenerationRequest of middles, whether it is a warm-up that only reads the prompt, the results asked for)
    from an /infill body."""
    prefix, suffix, typed = (_text(body, name) for name in ("input_prefix", "input_suffix", "prompt"))
    extra = _extra(body.get("input_extra"))
    n = body.get("n_cmpl", body.get("n", 1))
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= limits.max_k:
        raise InvalidRequest(f"Field 'n_cmpl': Value must be between 1 <= value <= {limits.max_k}, but got {n!r}")
    n_predict = capped_tokens(body.get("n_predict", defaults.max_new_tokens), limits)
    warm_up = n_predict == 0
    budget_ms = body.get("t_max_predict_ms")
    after_prompt = isinstance(budget_ms, (int, float)) and not isinstance(budget_ms, bool) and budget_ms > 0
    budget_s = (
        min(max(budget_ms / 1000, limits.min_budget_s), limits.max_budget_s) if after_prompt else defaults.budget_s
    )
    seed = body.get("seed", -1)
    seed = -1 if seed is None or (isinstance(seed, int) and seed < 0) else seed  # llama.cpp's -1 / 4294967295
    seed = -1 if seed == 0xFFFFFFFF else seed
    n_indent = body.get("n_indent", 0)
    if isinstance(n_indent, bool) or not isinstance(n_indent, int) or not 0 <= n_indent <= 1000:
        raise InvalidRequest(f"n_indent={n_indent!r} is out of range: it must be an integer in 0..1000")
    request = build_request(
        prefix + typed,
        k=1 if warm_up else n,
        budget_s=budget_s,
        temperature=0.0 if warm_up else body.get("temperature", defaults.temperature),
        max_new_tokens=1 if warm_up else n_predict,
        top_p=body.get("top_p", defaults.top_p),
        seed=seed,
        limits=limits,
        suffix=suffix or "\n",  # always a middle: "\n" is an empty file's end
        extra=extra,
        language=body.get("language"),
        filename=body.get("filename") if isinstance(body.get("filename"), str) else None,
        stop=stop_strings(body.get("stop")),
        deadline=EDITOR_DEADLINE if after_prompt else Deadline(),
        min_indent=n_indent,
        context_tokens=LOCAL_CONTEXT_TOKENS,
        extra_tokens=EXTRA_CONTEXT_TOKENS,
    )
    return request, warm_up, 1 if warm_up else n


def _text(body: dict, name: str) -> str:
    value = body.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidRequest(f"{name} must be a string, got {type(value).__name__}")
    return value


def _extra(chunks) -> tuple[ContextFile, ...]:
    if chunks is None:
        return ()
    if not isinstance(chunks, list) or not all(isinstance(c, dict) and isinstance(c.get("text"), str) for c in chunks):
        raise InvalidRequest('input_extra must be an array of {"filename": string, "text": string} objects')
    return tuple(ContextFile(str(c.get("filename") or "tmp"), c["text"]) for c in chunks if c["text"])


def _results(final: RunResult, request, model: str, warm_up: bool) -> list[dict]:
    """llama.cpp's result objects, best first (copies of one middle side by side), for the done run."""
    stats = final.engine_stats
    prompt_ms = stats.prefill_s * 1000
    predicted_ms = max(final.timings.generation_s * 1000 - prompt_ms, 0.0)
    cached = stats.cached_prompt_tokens
    computed = stats.prompt_read_tokens - cached
    copies = [] if warm_up else final.ranked_copies()
    results = [
        _result(
            index,
            entry.code,
            entry.tokens,
            entry.finish_reason,
            model,
            request,
            (computed, cached, prompt_ms, predicted_ms),
            entry.ranking(),
        )
        for index, entry in enumerate(copies)
    ]
    if not results:  # a warm-up, or nothing came in time
        results.append(
            _result(
                0,
                "",
                0,
                FINISH_STOP if warm_up else FINISH_BUDGET,
                model,
                request,
                (computed, cached, prompt_ms, predicted_ms),
                None,
            )
        )
    return results


def _result(
    index: int, content: str, tokens: int, reason: str, model: str, request, timing: tuple, ranked: dict | None
) -> dict:
    computed, cached, prompt_ms, predicted_ms = timing
    timings = {
        "cache_n": cached,
        "prompt_n": computed,
        "prompt_ms": round(prompt_ms, 3),
        "prompt_per_token_ms": round(prompt_ms / computed, 3) if computed else 0.0,
        "prompt_per_second": round(computed / prompt_ms * 1000, 3) if prompt_ms else 0.0,
        "predicted_n": tokens,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": round(predicted_ms / tokens, 3) if tokens else 0.0,
        "predicted_per_second": round(tokens / predicted_ms * 1000, 3) if predicted_ms else 0.0,
    }
    return {
        "index": index,
        "content": content,
        "tokens": [],
        "id_slot": 0,
        "stop": True,
        "model": model,
        "tokens_predicted": tokens,
        "tokens_evaluated": computed + cached,
        "generation_settings": {
            "n_ctx": 32768,
            "n_predict": request.max_new_tokens,
            "seed": request.seed,
            "temperature": request.temperature,
            "top_p": request.top_p,
        },
        "prompt": "",
        "has_new_line": "\n" in content,
        "truncated": False,
        "stop_type": STOP_TYPES.get(reason, "limit"),
        "stopping_word": "",
        "tokens_cached": computed + cached + tokens,
        "timings": timings,
        "ranked_drafts": ranked,
    }


def _only(result: dict, fields: list) -> dict:
    """llama.cpp's response_fields: the named fields only, a path "a/b" flattened under that name; missing ones left
    out ([""] gives {})."""
    picked = {}
    for path in fields:
        if not isinstance(path, str) or not path:
            continue
        value, found = result, True
        for part in path.split("/"):
            if isinstance(value, dict) and part in value:
                value = value[part]
            else:
                found = False
                break
        if found:
            picked[path] = value
    return picked


def _compact(payload) -> str:
    return json.dumps(payload, separators=(",", ":"))


def _error(status: int, message: str, kind: str, headers: dict | None = None) -> Response:
    return Response(
        _compact({"error": {"code": status, "message": message, "type": kind}}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
