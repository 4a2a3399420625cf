"""Prompt reading speed: our prefill against llama-server's on the same long prompts of real code, cold.

Each prompt is the start of a standard-library module's source, cut to --lengths tokens of the bundled model's
tokenizer (the cut decoded back to text, so both servers read the same text). Ours: the engine (raw prompt form,
so it reads exactly that text; --weights, regular decoding, no prefix cache) reads it and samples one token;
prompt tokens / stats.prefill_s (which includes sampling that token). llama-server (bundled Q4_K_M GGUF,
--threads, --no-repack): /completion with n_predict=1 and cache_prompt=false; its own timings (prompt_n,
prompt_ms). Methods alternate within each repeat; the first read of each method (another prompt) is untimed.
Prints a table and, as its last line, one JSON object.
Example: python -m benchmarks.bench_prefill --lengths 600,3000 --repeats 2 --llama-server BIN
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import logging
import statistics
import time

from benchmarks.servers import start_llama_remote
from engine import Engine, EngineSettings, GenerationRequest, load_any
from engine.models.loading import DEFAULT_TARGET
from engine.quant.cpu import cpu_description
from engine.quant.weights import apply_weight_format

PROMPT_SOURCE = "argparse"  # a stdlib module with enough code for the longest prompt (over 20k tokens)
WARMUP_SOURCE = "shlex"  # the untimed first read


def code_prompt(tokenizer, module: str, tokens: int) -> str:
    """The first `tokens` tokens of a module's source, as text."""
    ids = tokenizer(inspect.getsource(importlib.import_module(module)), add_special_tokens=False)["input_ids"]
    if len(ids) < tokens:
        raise ValueError(f"{module} has {len(ids)} tokens, fewer than {tokens}: choose a longer module")
    return tokenizer.decode(ids[:tokens])


def ours_prefill(engine: Engine, prompt: str) -> tuple[int, float]:
    """(prompt tokens, seconds to read them) of one cold read."""
    result = engine.generate(GenerationRequest(prompt, k=1, max_new_tokens=1, temperature=0.0, budget_s=1e6))
    return result.stats.prompt_tokens, result.stats.prefill_s


def llama_prefill(base_url: str, prompt: str) -> tuple[int, float]:
    """(prompt tokens, seconds) as llama-server reports them for one uncached read."""
    import httpx

    reply = httpx.post(
        f"{base_url}/completion",
        json={"prompt": prompt, "n_predict": 1, "cache_prompt": False, "temperature": 0.0},
        timeout=600,
    ).json()
    timings = reply["timings"]
    return int(timings["prompt_n"]), float(timings["prompt_ms"]) / 1000


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_TARGET)
    parser.add_argument("--weights", default="auto", help="our weight format (engine/quant/weights.py)")
    parser.add_argument("--lengths", default="600,3000", help="comma-separated prompt lengths in tokens")
    parser.add_argument(
        "--prefill-chunk", type=int, default=EngineSettings().prefill_chunk, help="our prompt tokens per forward"
    )
    parser.add_argument("--repeats", type=int, default=2, help="timed reads per prompt and method")
    parser.add_argument("--llama-server", help="llama-server binary (without it only ours is measured)")
    parser.add_argument("--threads", type=int, default=2, help="llama-server threads")
    return parser.parse_args(argv)


def our_engine(model, tokenizer, prefill_chunk: int) -> Engine:
    """The engine as measured: regular decoding, no prefix cache, the raw prompt form."""
    settings = EngineSettings(drafter="none", prefix_cache_mb=0, prompt_form="raw", prefill_chunk=prefill_chunk)
    return Engine(model, tokenizer, None, settings)


def time_reads(readers: dict, tokenizer, lengths: list[int], repeats: int) -> list[dict]:
    """Each reader's first call untimed, then per length `repeats` reads of each (alternating); a row per method and
    length with the median time."""
    for reader in readers.values():  # untimed: first calls
        reader(code_prompt(tokenizer, WARMUP_SOURCE, 200))
    rows = []
    for length in lengths:
        text = code_prompt(tokenizer, PROMPT_SOURCE, length)
        seen: dict[str, list[tuple[int, float]]] = {name: [] for name in readers}
        for _ in range(repeats):
            for name, reader in readers.items():
                seen[name].append(reader(text))
        for name, reads in seen.items():
            seconds = statistics.median(s for _, s in reads)
            rows.append(
                {
                    "method": name,
                    "length": length,
                    "prompt_tokens": reads[0][0],
                    "seconds": round(seconds, 3),
                    "tokens_per_s": round(reads[0][0] / seconds, 1),
                }
            )
    return rows


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    lengths = [int(x) for x in args.lengths.split(",")]
    model, tokenizer = load_any(args.model, progress=False)
    model = apply_weight_format(model, args.weights)
    engine = our_engine(model, tokenizer, args.prefill_chunk)
    server, remote, note = start_llama_remote(
        args.llama_server, args.model, slots=1, threads=args.threads, ctx_per_slot=max(lengths) + 64
    )
    readers = {"ours": lambda text: ours_prefill(engine, text)}
    if remote is not None:
        readers["llama"] = lambda text: llama_prefill(server.url, text)
    try:
        rows = time_reads(readers, tokenizer, lengths, args.repeats)
    finally:
        if server is not None:
            server.stop()
    print(f"{'method':8} {'tokens':>7} {'s (median)':>11} {'tokens/s':>9}")
    for row in rows:
        print(f"{row['method']:8} {row['prompt_tokens']:7d} {row['seconds']:11.3f} {row['tokens_per_s']:9.1f}")
    summary = {
        "benchmark": "bench_prefill",
        "model": args.model,
        "weights": getattr(model, "weight_format", "native"),
        "repeats": args.repeats,
        "llama": note or "run",
        "results": rows,
        "when": time.strftime("%Y-%m-%d"),
    }
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
