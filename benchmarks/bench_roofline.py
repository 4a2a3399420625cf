"""Where a decode step stands against this machine's limit: the memory bandwidth measured here, the bytes of
weights a step of the bundled 1.5B reads in each format, the step that bandwidth allows (the roofline) at 1 and 8
token rows, our measured step, llama-server's ms a token on the same GGUF, and where our step's time goes.

    python -m benchmarks.bench_roofline --llama-server BIN
    ATEN_CPU_CAPABILITY=avx2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \\
        python -m benchmarks.bench_roofline --llama-server BIN    # the same machine capped to AVX2

- bandwidth: the best of a few reads of a 2 GiB tensor (a sum over it: more than any cache holds), GB/s.
- bytes: what each linear layer reads for a call of 1 and of 8 token rows in the format as loaded (int4-w8a8 reads
  its 4-bit codes at one row and fbgemm's int8 weights from two rows on), the head included, the embedding table
  not (a lookup reads one row per token).
- measured: regular decoding of a function's prompt, 64 new tokens, k=1 greedy and k=8 sampled, the whole step
  (linears, attention, norms, sampling, Python): wall time after the prompt over the longest row's tokens.
- profile: torch.profiler over a 33-token and a 1-token generation; the difference over 32 steps, by kind of
  operator, at 1 and 8 rows; what no operator accounts for is the Python and dispatch between them.
- llama-server: `/completion` with 64 tokens to predict, its own `timings.predicted_per_token_ms` (one row), and 8
  such requests at once on 8 slots (ms a step: wall time over the tokens of the longest).
Prints tables and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import torch
from torch import nn

from benchmarks.servers import bundled_gguf, start_llama_server
from engine import EngineSettings, GenerationRequest, load_engine
from engine.models.loading import BUNDLED_PREFIX
from engine.quant.cpu import cpu_description
from engine.quant.kernels import INT4_ONE_ROW, LARGE_CALL_BUFFERS, DynamicInt8Linear, Int4Linear, Int8Linear

MODEL = "qwen2.5-coder-1.5b"
PROMPT = 'def running_mean(values: list[float]) -> list[float]:\n    """The mean of each prefix of values."""\n'
NEW_TOKENS = 64
KINDS = {  # operator name -> kind of work, by the first pattern it contains
    "linear": ("linear", "addmm", "mm", "matmul", "int4pack", "int8pack", "quantized::"),
    "attention": ("scaled_dot_product", "attention", "softmax", "bmm"),
    "norms and activations": ("rsqrt", "pow", "mean", "silu", "mul", "add", "neg", "cat", "sigmoid"),
    "cache and indexing": ("index", "copy_", "scatter", "gather", "select", "slice", "narrow", "clone", "to", "empty"),
}


def read_bandwidth_gbs(gib: float = 2.0, rounds: int = 5) -> float:
    """GB/s of the fastest of `rounds` sums over a `gib` GiB fp32 tensor."""
    data = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32)
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - started)
    return data.numel() * 4 / best / 1e9


def layer_bytes(module: nn.Module, rows: int) -> int:
    """Bytes of weights a call of `rows` token rows reads from one linear layer in its format."""
    if isinstance(module, DynamicInt8Linear):
        if module.four_bit is not None and rows <= INT4_ONE_ROW:
            return _buffer_bytes(module.four_bit)
        return module.packed_bytes
    if isinstance(module, (Int4Linear, Int8Linear)):
        small = module.max_rows is None or rows <= module.max_rows
        return _buffer_bytes(module, skip=LARGE_CALL_BUFFERS) if small else _tensor_bytes(module.dense_weight())
    return _tensor_bytes(module.weight)


def _buffer_bytes(module: nn.Module, skip: tuple[str, ...] = ()) -> int:
    return sum(_tensor_bytes(b) for name, b in module.named_buffers() if not name.endswith(skip))


def _tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def step_bytes(model: nn.Module, rows: int) -> int:
    """Bytes of weights one decode step of `rows` rows reads: every linear layer, the head included."""
    linears = (DynamicInt8Linear, Int4Linear, Int8Linear, nn.Linear)
    return sum(layer_bytes(m, rows) for m in model.modules() if isinstance(m, linears))


def measured_ms(engine, rounds: int) -> dict[str, float]:
    """Median ms a decode step at k=1 greedy and k=8 sampled (see the module's docstring)."""
    samples = {"1": [], "8": []}
    for round_ in range(rounds + 1):  # the first round warms up
        for k in (1, 8):
            ms = step_ms(engine, k, round_)
            if round_:
                samples[str(k)].append(ms)
    return {k: round(statistics.median(v), 1) for k, v in samples.items()}


def step_ms(engine, k: int, seed: int) -> float:
    """ms a decode step of one generation of NEW_TOKENS at k (k=1 greedy, else sampled): the wall time after the
    prompt over the longest row's tokens."""
    result = engine.generate(_request(k, NEW_TOKENS, seed))
    steps = max(len(c.token_ids) for c in result.candidates)
    return (result.stats.wall_s - result.stats.prefill_s) / steps * 1e3


def _request(k: int, tokens: int, seed: int) -> GenerationRequest:
    return GenerationRequest(
        PROMPT,
        k=k,
        max_new_tokens=tokens,
        budget_s=600,
        temperature=0.0 if k == 1 else 0.8,
        seed=seed,
        stop_at_body_end=False,
    )


def profile_step(engine, k: int) -> dict[str, float]:
    """ms a decode step by kind of operator (and 'python and dispatch', the rest of the wall time), from the
    difference between a 33-token and a 1-token generation."""
    totals = {}
    for tokens in (1, 33):
        engine.generate(_request(k, tokens, 0))  # warm
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            started = time.perf_counter()
            result = engine.generate(_request(k, tokens, 0))
            wall = time.perf_counter() - started
        steps = max(len(c.token_ids) for c in result.candidates)
        kinds = {kind: 0.0 for kind in (*KINDS, "other operators")}
        for event in prof.key_averages():
            kinds[_kind(event.key)] += event.self_cpu_time_total / 1e3  # ms
        kinds["python and dispatch"] = wall * 1e3 - sum(kinds.values())
        totals[tokens] = (steps, kinds)
    (short_steps, short), (long_steps, long) = totals[1], totals[33]
    per_step = max(long_steps - short_steps, 1)
    return {kind: round((long[kind] - short[kind]) / per_step, 2) for kind in long}


def _kind(name: str) -> str:
    lowered = name.lower()
    for kind, patterns in KINDS.items():
        if any(p in lowered for p in patterns):
            return kind
    return "other operators"


def llama_ms(binary: str, threads: int) -> dict[str, float]:
    """llama-server's ms a token at 1 row (its own timing) and ms a step of 8 requests at once (wall time)."""
    server = start_llama_server(bundled_gguf(MODEL), binary=binary, slots=8, ctx_per_slot=1024, threads=threads)
    try:
        body = {
            "prompt": PROMPT,
            "n_predict": NEW_TOKENS,
            "temperature": 0.0,
            "ignore_eos": True,
            "cache_prompt": False,
        }
        with httpx.Client(timeout=600) as client:
            client.post(server.url + "/completion", json=body)  # warm
            one = [
                client.post(server.url + "/completion", json=body).json()["timings"]["predicted_per_token_ms"]
                for _ in range(3)
            ]

            def post(seed: int) -> dict:
                return client.post(server.url + "/completion", json={**body, "temperature": 0.8, "seed": seed}).json()

            with ThreadPoolExecutor(8) as pool:
                started = time.perf_counter()
                answers = list(pool.map(post, range(8)))
                wall = time.perf_counter() - started
        longest = max(a["timings"]["predicted_n"] for a in answers)
        prompt_ms = max(a["timings"]["prompt_ms"] for a in answers)
        return {"1": round(statistics.median(one), 1), "8": round((wall * 1e3 - prompt_ms) / longest, 1)}
    finally:
        server.stop()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formats", default="bfloat16/int4-w8a8,float32/w8a8,bfloat16/native")
    parser.add_argument("--rounds", type=int, default=3, help="timed generations per k (the median counts)")
    parser.add_argument("--llama-server", default="", help="llama-server binary (.ci/build_llama_server)")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    bandwidth = read_bandwidth_gbs()
    print(f"CPU: {cpu_description()}; {threads} threads; read bandwidth {bandwidth:.1f} GB/s")
    rows = {}
    for pair in args.formats.split(","):  # one format loaded at a time: the 1.5B three times over is 12 GB
        dtype, weights = pair.split("/")
        engine = load_engine(
            BUNDLED_PREFIX + MODEL,
            dtype=dtype,
            weights=weights,
            settings=EngineSettings(drafter="none"),
            progress=False,
        )
        sizes = {k: step_bytes(engine.model, int(k)) for k in ("1", "8")}
        rows[pair] = {
            "mb": {k: round(v / 1e6) for k, v in sizes.items()},
            "roofline_ms": {k: round(v / bandwidth / 1e6, 1) for k, v in sizes.items()},
            "measured_ms": measured_ms(engine, args.rounds),
            "profile": {} if args.no_profile else {k: profile_step(engine, int(k)) for k in ("1", "8")},
        }
        del engine
    llama = llama_ms(args.llama_server, threads) if args.llama_server else None
    _print(rows, llama)
    summary = {
        "benchmark": "bench_roofline",
        "cpu": cpu_description(),
        "threads": threads,
        "bandwidth_gbs": round(bandwidth, 1),
        "formats": rows,
        "llama_server_ms": llama,
    }
    print(json.dumps(summary))
    return summary


def _print(rows: dict, llama: dict | None) -> None:
    print(f"\n{'format':<22}{'MB 1/8':>14}{'roofline ms 1/8':>18}{'ours ms 1/8':>16}{'ours / roofline 1':>20}")
    for pair, row in rows.items():
        mb, roof, ours = row["mb"], row["roofline_ms"], row["measured_ms"]
        print(
            f"{pair:<22}{mb['1']:>7}/{mb['8']:<6}{roof['1']:>10}/{roof['8']:<7}{ours['1']:>9}/{ours['8']:<6}"
            f"{ours['1'] / roof['1']:>18.2f}x"
        )
    if llama:
        print(f"{'llama-server Q4_K_M':<22}{'':>14}{'':>18}{llama['1']:>9}/{llama['8']:<6}")
    for pair, row in rows.items():
        for k, parts in row["profile"].items():
            print(f"\nprofile {pair}, {k} row(s), ms a step: " + ", ".join(f"{n} {v}" for n, v in parts.items()))


if __name__ == "__main__":
    main()
