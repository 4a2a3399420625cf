"""The editor plugins' requests: one cursor position of an editing session (Step), and the /infill bodies that
llama.vim and llama.vscode send there by default, as their sources write them (benchmarks/editor_ring.py replays
the ring of extra context they carry)."""

from __future__ import annotations

from dataclasses import dataclass

VSCODE_COMPLETIONS = 3  # llama.vscode's max_parallel_completions: its n_cmpl


@dataclass(frozen=True)
class Step:
    """One request of the session: where the cursor is and what has been typed on its line."""

    mode: str  # "lines", "keys", "cold" or "ring"
    file: str  # the module's file name
    line: int  # 1-based cursor line
    prefix: str  # input_prefix
    prompt: str  # the cursor line as typed
    suffix: str  # input_suffix
    real: str = ""  # the cursor line as the file has it (what a right suggestion completes it to)
    extra: tuple[dict, ...] = ()  # input_extra: mode "ring", the plugin's ring of chunks
    warmups: tuple[tuple[dict, ...], ...] = ()  # mode "ring": the ring each warm-up before the request sends
    ring_settled: bool = False  # mode "ring": full, or every chunk picked so far in it (8 or more)


def request_at(lines: list[str], index: int, typed: str, n_prefix: int, n_suffix: int) -> tuple[str, str]:
    """(input_prefix, input_suffix) as llama.vim builds them with the cursor at the end of `typed` on line `index`
    (0-based): the cursor line holds only what was typed, so its rest is empty."""
    before = lines[max(0, index - n_prefix) : index]
    after = lines[index + 1 : index + 1 + n_suffix]
    prefix = "".join(line + "\n" for line in before)
    return prefix, "\n" + "\n".join(after) + "\n"  # rest of the cursor line (empty), then the lines after


def llama_vim_body(step: Step, temperature: float | None = None) -> dict:
    """The request llama.vim sends by default (autoload/llama.vim at a1c8e6e, its g:llama_config defaults): no
    n_cmpl and no temperature (the server's own default applies unless `temperature` is given), n_predict 128,
    top_k 40, top_p 0.90, its samplers, n_indent the cursor line's indentation (a line of blanks: prompt "" and
    n_indent 0, s:fim_ctx_local's special case), t_max_prompt_ms 500,
    t_max_predict_ms 250 (llama#fim's first request at a position; its speculative follow-up, not sent here, has
    1000), the fields it reads back (and timings/cache_n, which the plugin does not ask for), the step's ring as
    input_extra."""
    body = {
        "id_slot": 0,
        "input_prefix": step.prefix,
        "input_suffix": step.suffix,
        "input_extra": list(step.extra),
        "prompt": step.prompt if step.prompt.strip() else "",
        "n_predict": 128,
        "stop": [],
        "n_indent": len(step.prompt) - len(step.prompt.lstrip()) if step.prompt.strip() else 0,
        "top_k": 40,
        "top_p": 0.90,
        "samplers": ["top_k", "top_p", "infill"],
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 250,
        "response_fields": [
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
            "timings/cache_n",
        ],
    }
    if temperature is not None:
        body["temperature"] = temperature
    return body


def llama_vscode_body(step: Step, temperature: float | None = None) -> dict:
    """The request llama.vscode sends by default (src/llama-server.ts and package.json at v0.0.63, 3938fb3):
    n_cmpl 3 (max_parallel_completions), n_predict 128, top_k 40, top_p 0.99, its samplers, no temperature,
    t_max_prompt_ms 500, t_max_predict_ms 500, n_indent only when the line is indented, the cursor line as typed
    in `prompt` but "" when only blanks are typed (src/completion.ts), the step's ring as input_extra."""
    indent = len(step.prompt) - len(step.prompt.lstrip())
    body = {
        "id_slot": 0,
        "input_prefix": step.prefix,
        "input_suffix": step.suffix,
        "input_extra": list(step.extra),
        "prompt": step.prompt if step.prompt.strip() else "",
        "n_predict": 128,
        "n_cmpl": VSCODE_COMPLETIONS,
        "top_k": 40,
        "top_p": 0.99,
        "stream": False,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": True,
        **({"n_indent": indent} if indent else {}),
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 500,
    }
    if temperature is not None:
        body["temperature"] = temperature
    return body


def plugin_body(plugin: str, step: Step, temperature: float | None) -> dict:
    """The default suggestion request of `plugin` (llama.vim or llama.vscode) at `step`."""
    return (llama_vscode_body if plugin == "llama.vscode" else llama_vim_body)(step, temperature)


def ring_warmup_body(extra: tuple[dict, ...], plugin: str = "llama.vim") -> dict:
    """The request llama.vim sends after each ring update (s:ring_update): the whole ring read into the cache,
    nothing generated; here it asks for the two timings the plugin does not read (what was computed, cached).
    llama.vscode's (extra-context.ts, the same ring rules save similarity measures) differs in a few fields."""
    body = {
        "id_slot": 0,
        "input_prefix": "",
        "input_suffix": "",
        "input_extra": list(extra),
        "prompt": "",
        "n_predict": 0,
        "temperature": 0.0,
        "samplers": [],
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": 1,
        "t_max_predict_ms": 1,
        "response_fields": ["timings/prompt_n", "timings/cache_n"],  # the plugin asks for [""]: it reads nothing
    }
    if plugin == "llama.vscode":  # its warm-up (createRequestPayload with noPredict): no temperature, its limits
        del body["temperature"], body["stream"], body["response_fields"]
        body["t_max_prompt_ms"] = 500
    return body
