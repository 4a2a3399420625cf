"""Differential soak on real models: real prompts, every drafter and both acceptance rules, fixed seeds, a busy
CPU part of the time; the engine's promises are checked as invariants and every violation is counted.

Example: python -m benchmarks.soak --humaneval 20 --seeds 2 --busy-every 3
Each (prompt, seed) runs regular decoding (the reference) and then every variant; a variant breaks a promise when:
  exception      generate() raised (the draft model's cache is checked against the histories at every proposal)
  late           it returned later than its budget plus its longest single forward pass (plus SLACK_S)
  tokens         a "coupled" variant's tokens differ from regular decoding's (a budget-cut row: not a prefix)
  special        a special (end-of-text) token sits inside a candidate's tokens
  text           the text does not start with decode(tokens), or goes on past it by more than part of a token
  stop           a "stop" row still holds a stop string, or a logical line that leaves the function's body
  length         a "length" row does not hold max_new_tokens tokens, or a row has no finish reason
  budget         a "budget" row in a call that ended before its budget
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field, replace

import torch

from engine import DEFAULT_DRAFT, DEFAULT_TARGET, Engine, EngineSettings, GenerationRequest, load_any
from engine.generate import end_of_text_ids
from engine.quant.cpu import cpu_description
from engine.quant.weights import WEIGHT_FORMATS, apply_weight_format
from engine.text.blocks import BodyEnd
from engine.types import FINISH_BUDGET, FINISH_LENGTH, FINISH_STOP

SLACK_S = 0.5  # bookkeeping and scheduling noise on top of one forward pass, on a shared 2-core machine
MAX_TAIL_CHARS = 48  # the part of one token a cut may keep beyond decode(tokens)

METHOD_PROMPTS = (
    'class Stack:\n    """A last-in, first-out stack."""\n\n    def __init__(self):\n        self.items = []\n\n'
    '    def pop(self):\n        """Remove and return the top item; raise IndexError when empty."""\n',
    "class Temperature:\n    def __init__(self, celsius: float):\n        self.celsius = celsius\n\n"
    '    def fahrenheit(self) -> float:\n        """The temperature in degrees Fahrenheit."""\n',
    "class Account:\n    def __init__(self, owner: str):\n        self.owner = owner\n        self.balance = 0\n\n"
    '    def deposit(self, amount: float) -> None:\n        """Add amount (> 0) to the balance."""\n',
    "class Matrix:\n    def __init__(self, rows):\n        self.rows = rows\n\n"
    '    def transpose(self):\n        """A new Matrix with rows and columns swapped."""\n\n'
    '    def shape(self):\n        """(number of rows, number of columns)."""\n',
    'def outer(values):\n    def key(item):\n        """Sort key: absolute value, then the value."""\n',
)
SCRIPTS = (
    "import os\n\n# Print the names of the Python files in the current directory, sorted.\n",
    "# Read numbers from numbers.txt (one per line) and print their mean.\n",
    'import json\n\ndata = {"a": 1, "b": [1, 2, 3]}\n# Write data to out.json with an indent of 2.\n',
)
MID_LINE = (
    'def clamp(x, low, high):\n    """x limited to [low, high]."""\n    return max(low, min(',
    'def mean(values):\n    """The arithmetic mean of values."""\n    total = sum(values)\n    return total /',
    "def is_even(n: int) -> bool:\n    return n % 2 ==",
    'words = ["apple", "kiwi", "banana"]\nlongest = max(words, key=',
)


@dataclass(frozen=True)
class Variant:
    """One way of generating the same samples."""

    name: str
    drafter: str
    acceptance: str = "coupled"
    budget_share: float = 0.0  # > 0: the budget is this share of the reference's wall time (the deadline path)

    @property
    def exact(self) -> bool:
        """Whether its tokens must equal regular decoding's (every coupled variant)."""
        return self.acceptance == "coupled"


VARIANTS = (
    Variant("prompt", "prompt"),
    Variant("sibling", "sibling"),
    Variant("model", "model"),
    Variant("auto", "auto"),
    Variant("model residual", "model", "residual"),
    Variant("auto short-budget", "auto", budget_share=0.4),
)


@dataclass
class Tally:
    """What one variant did over the soak."""

    requests: int = 0
    tokens: int = 0
    seconds: float = 0.0
    overshoot_s: float = 0.0  # the largest wall time past the budget
    violations: Counter = field(default_factory=Counter)
    examples: list = field(default_factory=list)


class ForwardClock:
    """The longest single forward pass of the watched models since the last reset (hooks on their modules)."""

    def __init__(self, *models):
        self.longest_s, self._started = 0.0, 0.0
        for model in models:
            if model is not None:
                model.register_forward_pre_hook(self._pre)
                model.register_forward_hook(self._post)

    def _pre(self, module, args):
        self._started = time.perf_counter()

    def _post(self, module, args, output):
        self.longest_s = max(self.longest_s, time.perf_counter() - self._started)

    def reset(self) -> None:
        self.longest_s = 0.0


def check(
    request: GenerationRequest,
    result,
    wall_s: float,
    longest_pass_s: float,
    reference,
    exact: bool,
    special_ids: frozenset[int],
    decode,
) -> list[tuple[str, str]]:
    """(kind, detail) for every promise this result breaks."""
    problems = []
    if wall_s > request.budget_s + longest_pass_s + SLACK_S:
        problems.append(
            (
                "late",
                f"{wall_s:.2f} s for a budget of {request.budget_s:.2f} s (longest forward {longest_pass_s:.2f} s)",
            )
        )
    body = BodyEnd.of(request.prompt) if getattr(request, "stop_at_body_end", True) else None
    for row, candidate in enumerate(result.candidates):
        problems += [
            (kind, f"row {row}: {detail}")
            for kind, detail in check_candidate(request, candidate, wall_s, body, special_ids, decode)
        ]
        if exact and reference is not None:
            problems += [("tokens", f"row {row}: {detail}") for detail in differ(candidate, reference.candidates[row])]
    return problems


def check_candidate(request, candidate, wall_s, body, special_ids, decode) -> list[tuple[str, str]]:
    problems = []
    if any(token in special_ids for token in candidate.token_ids):
        problems.append(("special", "a special token inside the tokens"))
    decoded = decode(candidate.token_ids)
    tail = candidate.text[len(decoded) :]
    if not candidate.text.startswith(decoded) or len(tail) > MAX_TAIL_CHARS:
        problems.append(("text", f"text {candidate.text[-40:]!r} vs decoded {decoded[-40:]!r}"))
    if candidate.finish_reason is None:
        problems.append(("length", "no finish reason"))
    if candidate.finish_reason == FINISH_LENGTH and len(candidate.token_ids) != request.max_new_tokens:
        problems.append(("length", f"'length' with {len(candidate.token_ids)} of {request.max_new_tokens} tokens"))
    if candidate.finish_reason == FINISH_STOP:
        if any(stop in candidate.text for stop in request.stop):
            problems.append(("stop", "a stop string inside the text"))
        if body is not None and body.ends_at(candidate.text) is not None:
            problems.append(("stop", f"the text leaves the body: {candidate.text[-60:]!r}"))
    if candidate.finish_reason == FINISH_BUDGET and wall_s < request.budget_s:
        problems.append(("budget", f"'budget' after {wall_s:.2f} s of {request.budget_s:.2f}"))
    return problems


def differ(candidate, expected) -> list[str]:
    """Regular decoding's tokens, or a prefix of them when either row was cut by its budget."""
    got, want = candidate.token_ids, expected.token_ids
    if FINISH_BUDGET in (candidate.finish_reason, expected.finish_reason):
        shorter = min(len(got), len(want))
        same = got[:shorter] == want[:shorter]
    else:
        same = got == want and candidate.finish_reason == expected.finish_reason
    if same:
        return []
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return [
        f"differs at token {first} ({len(got)} vs {len(want)} tokens, {candidate.finish_reason} vs "
        f"{expected.finish_reason})"
    ]


class Burner:
    """Keeps one core busy (a spinning process), as other programs do on a developer's laptop."""

    def __enter__(self):
        self.process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.process.kill()
        self.process.wait()


@dataclass
class SoakSettings:
    model: str = DEFAULT_TARGET
    draft: str | None = DEFAULT_DRAFT
    dtype: str = "float32"  # the token-for-token promise holds exactly in fp32
    weights: str = "native"  # engine.quant.weights.WEIGHT_FORMATS (int8/int4/w8a8: by the call's rows)
    k: int = 4
    max_new_tokens: int = 64
    temperature: float = 0.8
    top_p: float = 0.95
    budget_s: float = 120.0  # the reference's and the full-budget variants' budget
    humaneval: int = 10  # first n HumanEval prompts, plus the methods, scripts and mid-line prompts
    seeds: int = 1
    busy_every: int = 3  # every n-th (prompt, seed) group runs with one core kept busy (0: never)
    variants: tuple[str, ...] = tuple(v.name for v in VARIANTS)
    max_requests: int = 0  # stop after this many requests (0: all)
    seed_offset: int = 0  # added to every request's seed (another run, other samples)


def soak_prompts(humaneval: int) -> list[tuple[str, str]]:
    """(kind, prompt): HumanEval, methods inside classes, module-level scripts, prompts ending mid-line."""
    from benchmarks.bench_engine import humaneval_prompts

    kinds = [
        [("humaneval", p) for p in humaneval_prompts(humaneval)],
        [("method", p) for p in METHOD_PROMPTS],
        [("script", p) for p in SCRIPTS],
        [("mid-line", p) for p in MID_LINE],
    ]
    mixed = []  # round-robin over the kinds, so that a run cut short (--max-requests) still covers each of them
    for row in range(max(len(k) for k in kinds)):
        mixed += [k[row] for k in kinds if row < len(k)]
    return mixed


def run_soak(
    model, tokenizer, draft_model, settings: SoakSettings, prompts: list[tuple[str, str]], log=print
) -> dict[str, Tally]:
    """Run every (prompt, seed) group and tally each variant (the reference is tallied as "none")."""
    variants = [v for v in VARIANTS if v.name in settings.variants]
    special_ids = end_of_text_ids(model, tokenizer)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731 - the engine's own decode
    checked = {"check_cache": True} if "check_cache" in EngineSettings.__dataclass_fields__ else {}  # older engines
    engines = {
        (v.drafter, v.acceptance): Engine(
            model, tokenizer, draft_model, EngineSettings(drafter=v.drafter, acceptance=v.acceptance, **checked)
        )
        for v in (Variant("none", "none"), *variants)
        if v.drafter != "model" or draft_model is not None
    }
    clock = ForwardClock(model, draft_model)
    tallies = {name: Tally() for name in ["none"] + [v.name for v in variants]}
    group = 0
    for seed in range(settings.seeds):
        for kind, prompt in prompts:
            busy = settings.busy_every > 0 and group % settings.busy_every == settings.busy_every - 1
            group += 1
            with Burner() if busy else _nothing():
                stops = {"stop": ("\nif __name__",)} if kind == "script" else {}  # else the request's default
                request = GenerationRequest(
                    prompt,
                    k=settings.k,
                    max_new_tokens=settings.max_new_tokens,
                    budget_s=settings.budget_s,
                    temperature=settings.temperature,
                    top_p=settings.top_p,
                    seed=settings.seed_offset + 1000 * seed + group,
                    **stops,
                )
                reference = _one(
                    engines[("none", "coupled")], request, None, False, clock, tallies["none"], special_ids, decode
                )
                for variant in variants:
                    engine = engines.get((variant.drafter, variant.acceptance))
                    if engine is None:
                        continue
                    budget = settings.budget_s
                    if variant.budget_share and reference is not None:
                        budget = max(0.2, variant.budget_share * reference.stats.wall_s)
                    _one(
                        engine,
                        replace(request, budget_s=budget),
                        reference,
                        variant.exact,
                        clock,
                        tallies[variant.name],
                        special_ids,
                        decode,
                    )
            done = sum(t.requests for t in tallies.values())
            log(
                f"{done:4d} requests  group {group} ({kind}{', busy CPU' if busy else ''})  violations "
                f"{sum(sum(t.violations.values()) for t in tallies.values())}  "
                + json.dumps({n: [t.requests, t.tokens, dict(t.violations)] for n, t in tallies.items()})
            )
            if settings.max_requests and done >= settings.max_requests:
                return tallies
    return tallies


def _one(engine, request, reference, exact, clock, tally: Tally, special_ids, decode):
    clock.reset()
    started = time.perf_counter()
    try:
        result = engine.generate(request)
    except Exception as err:  # noqa: BLE001 - counted, with its traceback, as a broken promise
        tally.requests += 1
        tally.violations["exception"] += 1
        tally.examples.append(
            {
                "kind": "exception",
                "detail": "".join(traceback.format_exception(err))[-2000:],
                "prompt": request.prompt[:200],
                "seed": request.seed,
            }
        )
        return None
    wall_s = time.perf_counter() - started
    tally.requests += 1
    tally.tokens += result.stats.generated_tokens
    tally.seconds += wall_s
    tally.overshoot_s = max(tally.overshoot_s, wall_s - request.budget_s)
    for kind, detail in check(request, result, wall_s, clock.longest_s, reference, exact, special_ids, decode):
        tally.violations[kind] += 1
        if len(tally.examples) < 5:
            tally.examples.append(
                {
                    "kind": kind,
                    "detail": detail,
                    "prompt": request.prompt[:200],
                    "seed": request.seed,
                    "budget_s": request.budget_s,
                }
            )
    return result


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


KINDS = ("exception", "late", "tokens", "special", "text", "stop", "length", "budget")


def report(tallies: dict[str, Tally], settings: SoakSettings) -> dict:
    header = f"{'variant':<20}{'requests':>9}{'tokens':>8}{'tok/s':>7}{'overshoot s':>12}  " + "".join(
        f"{k:>10}" for k in KINDS
    )
    print(header)
    print("-" * len(header))
    for name, t in tallies.items():
        rate = t.tokens / t.seconds if t.seconds else 0.0
        print(
            f"{name:<20}{t.requests:>9}{t.tokens:>8}{rate:>7.1f}{t.overshoot_s:>12.2f}  "
            + "".join(f"{t.violations[k]:>10}" for k in KINDS)
        )
    total = Counter()
    for t in tallies.values():
        total.update(t.violations)
    summary = {
        "benchmark": "soak",
        "settings": asdict(settings),
        "requests": sum(t.requests for t in tallies.values()),
        "tokens": sum(t.tokens for t in tallies.values()),
        "violations": {k: total[k] for k in KINDS},
        "total_violations": sum(total.values()),
        "variants": {
            name: {
                "requests": t.requests,
                "tokens": t.tokens,
                "seconds": round(t.seconds, 2),
                "max_overshoot_s": round(t.overshoot_s, 3),
                "violations": dict(t.violations),
            }
            for name, t in tallies.items()
        },
        "examples": [e for t in tallies.values() for e in t.examples][:20],
    }
    for example in summary["examples"]:
        print(f"  {example['kind']}: {example['detail'][:300]}")
    return summary


def main(argv=None) -> dict:
    defaults = SoakSettings()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=defaults.model)
    parser.add_argument("--draft", default=defaults.draft, help="draft model spec; 'none' for no draft model")
    parser.add_argument("--dtype", default=defaults.dtype)
    parser.add_argument(
        "--weights",
        default=defaults.weights,
        choices=WEIGHT_FORMATS,
        help="weight format of target and draft (engine/quant/weights.py)",
    )
    parser.add_argument("--k", type=int, default=defaults.k)
    parser.add_argument("--max-new-tokens", type=int, default=defaults.max_new_tokens)
    parser.add_argument("--temperature", type=float, default=defaults.temperature)
    parser.add_argument("--humaneval", type=int, default=defaults.humaneval)
    parser.add_argument("--seeds", type=int, default=defaults.seeds)
    parser.add_argument("--busy-every", type=int, default=defaults.busy_every)
    parser.add_argument("--variants", default=",".join(defaults.variants))
    parser.add_argument("--max-requests", type=int, default=0)
    parser.add_argument("--seed-offset", type=int, default=0, help="added to every seed (another run's samples)")
    args = parser.parse_args(argv)
    settings = SoakSettings(
        model=args.model,
        draft=None if args.draft == "none" else args.draft,
        dtype=args.dtype,
        weights=args.weights,
        k=args.k,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        humaneval=args.humaneval,
        seeds=args.seeds,
        busy_every=args.busy_every,
        variants=tuple(args.variants.split(",")),
        max_requests=args.max_requests,
        seed_offset=args.seed_offset,
    )
    model, tokenizer = load_any(settings.model, progress=False, dtype=settings.dtype)
    draft_model = load_any(settings.draft, progress=False, dtype=settings.dtype)[0] if settings.draft else None
    model, draft_model = (apply_weight_format(m, settings.weights) for m in (model, draft_model))
    started = time.perf_counter()
    tallies = run_soak(
        model,
        tokenizer,
        draft_model,
        settings,
        soak_prompts(settings.humaneval),
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    summary = report(tallies, settings)
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    summary["torch_threads"] = torch.get_num_threads()
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
