"""Time to k finished candidates of real prompts, as the user waits for them, against peers in the same run.

Every method gets the same prompts (HumanEval, methods inside classes, a prompt ending mid-line), the same k,
temperature and top-p, and the same end rule: a candidate ends at the end of text or where it leaves the function
the prompt opened (engine/text/blocks.py; transformers gets it as a stopping criterion, llama-server's text is cut by
the remote source as it streams, and its stream is closed once every row is done). A method is timed from the call
to the moment all k candidates are finished. Methods:
  ours_none, ours_prompt, ours_sibling, ours_model, ours_auto   our engine (--dtype), each drafter
  ours_...@int8, @int4, @w8a8, @int4-w8a8
                              the same on copies of target and draft in that weight format (engine/quant/weights.py)
  ours_...+raw, ours_...+chat the same with that prompt form (engine/text/chat.py; without it: the engine's default,
  auto)
  ours_...+sampled            every row sampled (without it, k > 1 makes row 0 the greedy answer, as the app asks)
  hf                          transformers generate, k copies of the prompt in one batch, same dtype
  hf_assisted                 the same with the draft model as assistant (assisted generation: k=1 only)
  llama                       llama.cpp's llama-server (n=k: the prompt processed once, copied to k slots), on
                              the bundled GGUF (Q4_K_M), through engine/remote.py; needs --llama-server BIN
  llama+chat                  the same given the chat form's text (the prompt our default reads, engine/text/chat.py),
                              its rows ending where ours do (the code's body end, the closing fence): like for
                              like with our default form (its rows are all sampled; ours have the greedy row 0)
The empty column counts candidates without a token: a server may end a row at once, ours may not (engine/text/chat.py).
Methods are interleaved prompt by prompt (the machine is shared and noisy: ratios within one run hold). Before
the timed prompts, each method serves one untimed request (the next HumanEval prompt, same k and temperature): a
running app has paid its first calls already, and `auto` has measured its drafters; its seconds are reported
as warm-up s.
Example: python -m benchmarks.bench_e2e --k 8 --temperature 0.8 --prompts 5 --methods hf,ours_none,ours_auto,llama
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from dataclasses import dataclass, field, replace

import torch

from benchmarks.bench_engine import add_run_arguments, humaneval_prompts, low_byte_copies, weight_format_of
from benchmarks.servers import start_llama_remote
from benchmarks.soak import METHOD_PROMPTS, MID_LINE
from engine import Engine, EngineSettings, GenerationRequest, load_any
from engine.generate import end_of_text_ids
from engine.quant.cpu import cpu_description
from engine.text.blocks import BodyEnd
from engine.text.chat import CLOSING_FENCE, PROMPT_FORMS, ChatForm
from engine.text.stopping import StopRules

OURS = ("ours_none", "ours_prompt", "ours_sibling", "ours_model", "ours_auto")
METHODS = OURS + ("hf", "hf_assisted", "llama", "llama+chat")


@dataclass
class Tally:
    """One method at one (k, temperature): per-prompt seconds to all k finished, and tokens."""

    seconds: list[float] = field(default_factory=list)
    tokens: int = 0
    empty_rows: int = 0  # candidates without a token (a server may end a row at once; ours cannot)
    note: str = ""
    warmup_s: float | None = None  # the untimed first request (another prompt): first calls, a drafter's measuring

    def as_dict(self) -> dict:
        total = sum(self.seconds)
        return {
            "prompts": len(self.seconds),
            "mean_s_per_prompt": round(total / len(self.seconds), 3) if self.seconds else None,
            "tokens": self.tokens,
            "empty_rows": self.empty_rows,
            "warmup_s": None if self.warmup_s is None else round(self.warmup_s, 3),
            "tokens_per_s": round(self.tokens / total, 3) if total else None,
            "note": self.note or None,
        }


def prompts(count: int, first: int = 0) -> list[str]:
    """HumanEval prompts first..first+count-1; from the first one on, a method and a mid-line prompt too."""
    extra = [METHOD_PROMPTS[0], MID_LINE[0]] if first == 0 else []
    return humaneval_prompts(first + count)[first:] + extra


def warmup_prompt(count: int, first: int = 0) -> str:
    """The HumanEval prompt after the timed ones."""
    return humaneval_prompts(first + count + 1)[first + count]


class BodyEndCriterion:
    """transformers stopping criterion: a row is done once its text leaves the prompt's function (or its row hit an
    end-of-text token). Returns a [B] bool tensor, as transformers' per-row criteria do."""

    def __init__(self, tokenizer, prompt: str, prompt_len: int, eos_ids: frozenset[int]):
        self.tokenizer, self.rule, self.prompt_len, self.eos_ids = tokenizer, BodyEnd.of(prompt), prompt_len, eos_ids

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        done = []
        for row in input_ids[:, self.prompt_len :].tolist():
            ended = any(t in self.eos_ids for t in row)
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            done.append(ended or self.rule.ends_at(text) is not None)
        return torch.tensor(done, device=input_ids.device)


def run_ours(engine: Engine, prompt: str, k: int, args, seed: int, greedy_first: bool = True) -> tuple[float, int, int]:
    request = GenerationRequest(
        prompt,
        k=k,
        max_new_tokens=args.max_new_tokens,
        budget_s=1e6,
        temperature=args.temperature_now,
        top_p=args.top_p,
        seed=seed,
        greedy_first=greedy_first and k > 1,
    )
    started = time.perf_counter()
    result = engine.generate(request)
    return time.perf_counter() - started, *_counts([len(c.token_ids) for c in result.candidates])


def _counts(row_tokens: list[int]) -> tuple[int, int]:
    """(tokens, rows without a token) of one request's candidates."""
    return sum(row_tokens), sum(n == 0 for n in row_tokens)


def run_hf(
    model, tokenizer, prompt: str, k: int, args, eos_ids: frozenset[int], assistant=None
) -> tuple[float, int, int]:
    """transformers generate on k copies of the prompt (with `assistant`: assisted generation, batch 1 only)."""
    from transformers import StoppingCriteriaList

    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids.to(model.device)
    batch = ids.repeat(k, 1)
    sampling = (
        {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if args.temperature_now == 0
        else {"do_sample": True, "temperature": args.temperature_now, "top_p": args.top_p, "top_k": None}
    )
    criterion = BodyEndCriterion(tokenizer, prompt, ids.shape[1], eos_ids)
    started = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(
            batch,
            attention_mask=torch.ones_like(batch),
            max_new_tokens=args.max_new_tokens,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            eos_token_id=sorted(eos_ids),
            stopping_criteria=StoppingCriteriaList([criterion]),
            **sampling,
            **({"assistant_model": assistant} if assistant is not None else {}),
        )
    seconds = time.perf_counter() - started
    row_tokens = []
    for row in out[:, ids.shape[1] :].tolist():
        ends = [i for i, t in enumerate(row) if t in eos_ids]
        row_tokens.append(ends[0] if ends else len(row))
    return seconds, *_counts(row_tokens)


def run_llama(remote, prompt: str, k: int, args, form: ChatForm | None = None) -> tuple[float, int, int]:
    """llama-server's k candidates of `prompt`; with `form`, of its chat-form text, the rows ending where ours do: at
    the end of the code's function body (the rules of `prompt`, not of the text sent, which holds the code twice:
    a bracket or docstring the prompt leaves open would be open twice) or at the closing fence."""
    request = GenerationRequest(
        prompt,
        k=k,
        max_new_tokens=args.max_new_tokens,
        budget_s=1e6,
        temperature=args.temperature_now,
        top_p=args.top_p,
    )
    rules = StopRules.of(request, frozenset(), (CLOSING_FENCE,)) if form else None
    started = time.perf_counter()
    # with the form, the server stops a row at the fence itself, as our engine does (the body end is cut here)
    sent = replace(request, prompt=form.prompt_text(prompt), stop=(CLOSING_FENCE,)) if form else request
    result = remote.generate(sent, rules=rules)
    return time.perf_counter() - started, *_counts([len(c.logprobs) for c in result.candidates])


def parse_args(argv) -> argparse.Namespace:
    """The options, checked: every method known."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser)
    parser.add_argument("--prompts", type=int, default=5, help="N HumanEval prompts (+ a method, a mid-line)")
    parser.add_argument(
        "--first",
        type=int,
        default=0,
        help="the first HumanEval prompt's index; above 0, prompts no "
        "other benchmark of ours uses (e.g. 120), and without the method and mid-line prompts",
    )
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument(
        "--methods", default="hf,ours_none,ours_auto,llama", help=f"comma-separated of {','.join(METHODS)}"
    )
    parser.add_argument("--dtype", default="auto", help="weights of ours and hf: auto (bf16 on this CPU), float32...")
    parser.add_argument("--llama-server", help="llama-server binary (for the llama method)")
    parser.add_argument("--threads", type=int, default=2, help="llama-server threads")
    args = parser.parse_args(argv)
    unknown = {m for m in args.methods.split(",") if not _known(m)}
    if unknown:
        parser.error(
            f"unknown methods {sorted(unknown)}: choose from {', '.join(METHODS)} (ours_...@int8, "
            "@int4, @w8a8 or @int4-w8a8 too, and ours_...+raw or +chat)"
        )
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    methods = args.methods.split(",")
    model, tokenizer = load_any(args.model, progress=False, dtype=args.dtype)
    draft = load_any(args.draft, progress=False, dtype=args.dtype)[0] if args.draft else None
    eos_ids = end_of_text_ids(model, tokenizer)
    engines = our_engines(methods, model, tokenizer, draft, args)
    server, remote, notes = None, None, {}
    if any(m.startswith("llama") for m in methods):
        slots = max(int(x) for x in args.k.split(","))
        server, remote, note = start_llama_remote(args.llama_server, args.model, slots=slots, threads=args.threads)
        notes.update({m: note for m in methods if m.startswith("llama")})
    texts, warmup = prompts(args.prompts, args.first), warmup_prompt(args.prompts, args.first)
    form = ChatForm.of(tokenizer, model)  # what llama+chat sends: the text our default form reads
    results = []
    try:
        for k in [int(x) for x in args.k.split(",")]:
            for temperature in [float(x) for x in args.temperature.split(",")]:
                args.temperature_now = temperature
                run = functools.partial(
                    run_method,
                    k=k,
                    args=args,
                    engines=engines,
                    hf=(model, tokenizer, draft),
                    eos_ids=eos_ids,
                    remote=remote,
                    form=form,
                )
                tallies = time_methods(methods, texts, warmup, run, args.seed, notes)
                results.append(report(k, temperature, tallies))
    finally:
        if server is not None:
            server.stop()
    summary = {
        "benchmark": "bench_e2e",
        "model": args.model,
        "draft": args.draft,
        "dtype": str(model.dtype),
        "prompts": len(texts),
        "first": args.first,
        "max_new_tokens": args.max_new_tokens,
        "torch_threads": torch.get_num_threads(),
        "results": results,
    }
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


def time_methods(
    methods: list[str], texts: list[str], warmup: str, run, seed: int, notes: dict[str, str]
) -> dict[str, Tally]:
    """Every method's untimed warm-up, then the prompts one by one, the methods interleaved on each;
    `run(method, prompt, seed)` is run_method at one (k, temperature)."""
    tallies = {m: Tally(note=notes.get(m, "")) for m in methods}
    for method in methods:  # untimed: what every method pays once, before the prompts are timed
        measured = run(method, warmup, seed + len(texts))
        tallies[method].warmup_s = measured[0] if isinstance(measured, tuple) else None
    for index, prompt in enumerate(texts):
        for method in methods:
            tally = tallies[method]
            measured = run(method, prompt, seed + index)
            if isinstance(measured, str):
                tally.note = tally.note or measured
                continue
            tally.seconds.append(measured[0])
            tally.tokens += measured[1]
            tally.empty_rows += measured[2]
    return tallies


def run_method(
    method: str,
    prompt: str,
    seed: int,
    *,
    k: int,
    args,
    engines: dict[str, Engine],
    hf,
    eos_ids,
    remote,
    form: ChatForm | None,
) -> tuple[float, int, int] | str:
    """(seconds to all k finished, tokens, rows without a token) of one method on one prompt, or why it cannot
    run."""
    model, tokenizer, draft = hf
    if method in engines:
        return run_ours(engines[method], prompt, k, args, seed, greedy_first="sampled" not in method.split("+"))
    if method == "hf":
        return run_hf(model, tokenizer, prompt, k, args, eos_ids)
    if method == "hf_assisted" and draft is not None and k == 1:
        return run_hf(model, tokenizer, prompt, k, args, eos_ids, assistant=draft)
    if method == "hf_assisted":
        return "needs --draft" if draft is None else "transformers assists batch 1 only"
    if method == "llama" and remote is not None:
        return run_llama(remote, prompt, k, args)
    if method == "llama+chat" and remote is not None:
        return run_llama(remote, prompt, k, args, form) if form else "the model has no chat form"
    return "not run"


OPTIONS = PROMPT_FORMS + ("sampled",)  # what may follow an ours_... method after "+"


def _known(method: str) -> bool:
    if method in METHODS:
        return True
    base, *options = method.split("+")
    if options:
        return (
            base.split("@")[0] in OURS
            and all(o in OPTIONS for o in options)
            and (base in OURS or bool(weight_format_of(base)))
        )
    return bool(weight_format_of(method)) and method.split("@")[0] in OURS


def our_engines(methods: list[str], model, tokenizer, draft, args) -> dict[str, Engine]:
    """An engine per ours_... method; methods of one weight format (@int8, @int4, @w8a8, @int4-w8a8) share copies of
    target and draft."""
    low_byte = low_byte_copies(args, methods, bool(args.draft), progress=False)
    engines = {}
    for method in methods:
        base, *options = method.split("+")
        name = base.split("@")[0]
        if name not in OURS or (name == "ours_model" and draft is None):
            continue
        target, drafting = low_byte[weight_format_of(base)] if weight_format_of(base) else (model, draft)
        form = next((o for o in options if o in PROMPT_FORMS), "auto")
        engines[method] = Engine(
            target, tokenizer, drafting, EngineSettings(drafter=name.removeprefix("ours_"), prompt_form=form)
        )
    return engines


def report(k: int, temperature: float, tallies: dict[str, Tally]) -> dict:
    base_name = baseline_of(list(tallies))
    base = tallies.get(base_name)
    base_s = sum(base.seconds) if base and base.seconds else None
    print(f"\nk={k} T={temperature} (vs {base_name})")
    print(f"{'method':<19}{'s/prompt':>10}{'tokens/s':>10}{'vs ours_none':>14}{'warm-up s':>11}{'empty':>7}  note")
    rows = {}
    for method, tally in tallies.items():
        row = tally.as_dict()
        total = sum(tally.seconds)
        row["speedup_vs_ours_none"] = round(base_s / total, 3) if base_s and total else None
        rows[method] = row
        print(
            f"{method:<19}{row['mean_s_per_prompt'] or float('nan'):>10.2f}{row['tokens_per_s'] or float('nan'):>10.2f}"
            f"{row['speedup_vs_ours_none'] or float('nan'):>14.3f}{row['warmup_s'] or float('nan'):>11.2f}"
            f"{tally.empty_rows:>7}  {tally.note}"
        )
    return {"k": k, "temperature": temperature, "baseline": base_name, "methods": rows}


def baseline_of(methods: list[str]) -> str | None:
    """The method the others are compared with: ours_none, else the first ours_none@format without options."""
    if "ours_none" in methods:
        return "ours_none"
    return next((m for m in methods if m.split("@")[0] == "ours_none" and "+" not in m), None)


if __name__ == "__main__":
    main()
