"""A client of `POST /infill` (llama.cpp's protocol, which our app and llama-server both serve): request bodies and
one answer as the client saw it."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

WARMUP = {"input_prefix": "def add(a, b):\n", "input_suffix": "\n", "prompt": "    return", "input_extra": []}


@dataclass
class Reply:
    """One /infill answer as the client saw it."""

    seconds: float  # end to end on the client
    contents: list[str]  # the middles, in the server's order (ours: best first)
    prompt_n: int | None  # prompt tokens computed (the first result's timings)
    cache_n: int | None  # prompt tokens taken from the cache
    predicted_n: int  # tokens generated, all results together
    ranks: list[int] | None = None  # ours: ranked_drafts.rank of each result
    error: str = ""  # HTTP status and text of a refused request
    first_line_right: bool | None = None  # the first suggestion's first line equals the file's line
    first_line_similarity: float | None = None


def infill_body(
    prefix: str,
    suffix: str,
    prompt: str,
    *,
    k: int,
    n_predict: int,
    temperature: float,
    top_p: float,
    top_k: int,
    samplers: list[str] | None,
    t_max_predict_ms: int,
    extra: list[dict] | None = None,
) -> dict:
    """A llama.cpp /infill request body (non-streaming, prompt cache on)."""
    body = {
        "input_prefix": prefix,
        "input_suffix": suffix,
        "input_extra": extra or [],
        "prompt": prompt,
        "n_predict": n_predict,
        "n_cmpl": k,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "cache_prompt": True,
        "t_max_predict_ms": t_max_predict_ms,
        "stream": False,
    }
    if samplers:
        body["samplers"] = samplers
    return body


def warmup_body(k: int, temperature: float) -> dict:
    """The untimed first request of every server: a tiny function, k alternatives."""
    return {
        **WARMUP,
        "n_predict": 8,
        "n_cmpl": k,
        "temperature": temperature,
        "cache_prompt": True,
        "t_max_predict_ms": 60000,
        "stream": False,
    }


def post_infill(client: httpx.Client, url: str, body: dict, timeout_s: float = 600.0) -> Reply:
    """Send one /infill request and read its answer: one object for n_cmpl=1, an array for more."""
    started = time.perf_counter()
    response = client.post(url + "/infill", json=body, timeout=timeout_s)
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        return Reply(seconds, [], None, None, 0, error=f"HTTP {response.status_code}: {response.text[:300]}")
    results = response.json()
    results = results if isinstance(results, list) else [results]
    timings = [result_timings(r) for r in results]
    ranked = all(r.get("ranked_drafts") for r in results)  # ours; a warm-up's is null
    ranks = [r["ranked_drafts"].get("rank") for r in results] if ranked else None
    return Reply(
        seconds,
        [r.get("content", "") for r in results],
        timings[0].get("prompt_n"),
        timings[0].get("cache_n"),
        sum(int(t.get("predicted_n") or 0) for t in timings),
        ranks,
    )


def result_timings(result: dict) -> dict:
    """A result's timings: its `timings` object, or the `timings/...` fields a body's response_fields asked for."""
    return result.get("timings") or {
        key.split("/", 1)[1]: value for key, value in result.items() if key.startswith("timings/")
    }
