"""Examples in people's words: HumanEval's docstring examples rewritten in other phrasings, the same candidates
ranked with the checks read from the rewritten prompts, against the original phrasing.

Each problem's examples that read as a call and a value (doctests and inline forms) are taken out of its docstring
and written again, where the first of them stood, in one of STYLES (problem i gets style i mod len(STYLES)); printed
output examples are left as they are. The phrasings were written after checks/extract.py's forms were built, to
stand for people's habits the extraction was not tuned on; some of them it does not read (the table without an
"input" column).

    python -m benchmarks.rephrase_examples --samples benchmarks/data/humaneval_shipped_qwen2.5-coder-1.5b_k12_t0.8.jsonl.gz

Sets of phrasings (--set): first, held-out, fresh, newest (each written after the reading it was first measured
on), and "as written" (HumanEval's own). With --reader FILE, where the patterns read fewer examples than a
docstring calls its function, the model reads them (app/model_examples.py: the bundled 1.5B, greedy); what it read
is kept in FILE (resumable, one file per set) and checked beside the patterns' examples, a third ranking.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

import numpy as np

from benchmarks.eval_humaneval import EvalSettings, evaluate, load_problems, read_samples, with_greedy_row
from benchmarks.sandbox import SandboxSettings
from checks import checks_for_prompt
from checks.check import VALUE
from checks.extract import text_view, top_level_functions
from engine.quant.cpu import cpu_description
from rerank import RankSettings


def _table(pairs):
    return ["| call | result |", "|------|--------|"] + [f"| {call} | {value} |" for call, value in pairs]


STYLES = {  # name -> lines of the examples, from (call, value) pairs
    "gives back": lambda pairs: [f"Calling {c} gives back {v}." for c, v in pairs],
    "e.g. on one line": lambda pairs: ["e.g. " + "; ".join(f"{c} -> {v}" for c, v in pairs)],
    "value below": lambda pairs: [line for c, v in pairs for line in (f"{c} returns", f"    {v}")],
    "markdown": lambda pairs: [f"`{c}` == `{v}`" for c, v in pairs],
    "table": _table,
    "comment arrow": lambda pairs: [f"{c}  # => {v}" for c, v in pairs],
    "you should get": lambda pairs: [f"If you call {c}, you should get {v}." for c, v in pairs],
    "the output of": lambda pairs: [f"The output of {c} is {v}." for c, v in pairs],
    "evaluates to": lambda pairs: [f"{c} evaluates to {v}" for c, v in pairs],
    "example =": lambda pairs: [f"Example: {c} = {v}" for c, v in pairs],
}


HELD_OUT = {  # a second set, written after the table form was mended on the first (STYLES is no longer held out)
    "sample / expected": lambda pairs: [line for c, v in pairs for line in (f"Sample call: {c}", f"Expected: {v}")],
    "double arrow": lambda pairs: [f"{c} ⇒ {v}" for c, v in pairs],
    "prints": lambda pairs: [f"Running {c} prints {v}" for c, v in pairs],
    "assert": lambda pairs: [f"assert {c} == {v}" for c, v in pairs],
    "when called as": lambda pairs: [f"When called as {c} it returns {v}." for c, v in pairs],
    "given ..., the answer": lambda pairs: [f"Given {c}, the answer is {v}." for c, v in pairs],
    "expected result of": lambda pairs: [f"The expected result of {c} is {v}" for c, v in pairs],
    "numbered": lambda pairs: [f"{i}. {c} → {v}" for i, (c, v) in enumerate(pairs, start=1)],
}
FRESH = {  # a third set, written after the held-out set's forms were mended (neither earlier set is held out now)
    "in parentheses": lambda pairs: [f"(for instance {c} is {v})" for c, v in pairs],
    "colon list": lambda pairs: ["Examples: " + ", ".join(f"{c}: {v}" for c, v in pairs)],
    "should be": lambda pairs: [f"The value of {c} should be {v}." for c, v in pairs],
    "returning": lambda pairs: [f"{c}, returning {v}" for c, v in pairs],
    "in: / out:": lambda pairs: [line for c, v in pairs for line in (f"in:  {c}", f"out: {v}")],
    "spaced arrow": lambda pairs: [f"{c}   ---->   {v}" for c, v in pairs],
    "doctest-like comment": lambda pairs: [line for c, v in pairs for line in (f"# {c}", f"# {v}")],
    "equals sign words": lambda pairs: [f"{c} equals {v}" for c, v in pairs],
}
NEWEST = {  # a fourth set, written after the model's reader (app/model_examples.py) was built, before it was measured
    "yields": lambda pairs: [f"{c} yields {v}" for c, v in pairs],
    "we expect": lambda pairs: [f"We expect {c} to be {v}." for c, v in pairs],
    "Q/A": lambda pairs: [f"Q: {c}? A: {v}" for c, v in pairs],
    "result of": lambda pairs: [f"Result of {c}: {v}" for c, v in pairs],
    "try, you get": lambda pairs: [f"Try {c}; you get {v}." for c, v in pairs],
    "the output is": lambda pairs: [f"For {c} the output is {v}." for c, v in pairs],
    "dash colon": lambda pairs: [f"- {c}: {v}" for c, v in pairs],
    "would be": lambda pairs: [f"{c} would be {v}" for c, v in pairs],
}
# "as written": HumanEval's own phrasing, nothing rewritten
SETS = {"as written": {}, "first": STYLES, "held-out": HELD_OUT, "fresh": FRESH, "newest": NEWEST}


def example_lines(lines: list[str], line: int) -> list[int]:
    """The 0-based lines of the example that starts at 1-based `line`: a doctest's `>>>` and `...` lines and its
    output (up to a blank line or the next `>>>`), else that line alone."""
    view = [text_view(text) for text in lines]  # as the extraction reads them: a docstring's quotes are blank
    first = line - 1
    if not view[first].startswith(">>>"):
        return [first]
    taken, index = [first], first + 1
    while index < len(view) and view[index].startswith("..."):
        taken.append(index)
        index += 1
    while index < len(view) and view[index] and not view[index].startswith(">>>"):
        taken.append(index)
        index += 1
    return taken


def rephrased(prompt: str, style: str, styles: dict = STYLES) -> tuple[str, int]:
    """The prompt with its call-and-value examples written in `style`, and how many were rewritten."""
    checks = [c for c in checks_for_prompt(prompt) if c.compare == VALUE and not c.setup]
    if not checks:
        return prompt, 0
    lines = prompt.splitlines()
    taken = sorted({i for c in checks for i in example_lines(lines, c.line)})
    first = lines[taken[0]]
    indent = first[: len(first) - len(first.lstrip())]
    new = [indent + text for text in styles[style]([(c.expression, c.expected) for c in checks])]
    kept = [line for i, line in enumerate(lines) if i not in taken or i == taken[0]]
    at = kept.index(first)
    return "\n".join(kept[:at] + new + kept[at + 1 :]) + "\n", len(checks)


_ARGUMENT_LINE = re.compile(r"^[a-z_]\w*\s*:\s*[\[\d'\"(-]")
_INPUT_OUTPUT = re.compile(r"^(?:input|output|explanation)\s*:", re.IGNORECASE)
_EXAMPLE_HEADER = re.compile(r"^(?:for\s+)?(?:an?\s+)?examples?(?:\s*\d+)?\s*:?$|^e\.g\.:?$", re.IGNORECASE)


def stripped(prompt: str) -> str:
    """The prompt with every example taken out of its docstring: the lines of each check the extraction reads
    (printed-output doctests too), any other `>>>` line with its output, and "Example:" headers."""
    lines = prompt.splitlines()
    view = [text_view(line) for line in lines]
    taken = {i for c in checks_for_prompt(prompt) for i in example_lines(lines, c.line)}
    taken |= {j for i, text in enumerate(view) if text.startswith(">>>") for j in example_lines(lines, i + 1)}
    taken |= {i for i, text in enumerate(view) if _EXAMPLE_HEADER.match(text) or _INPUT_OUTPUT.match(text)}
    names = "|".join(map(re.escape, top_level_functions(prompt)))
    if names:  # examples the extraction cannot read (`is_happy(a) => False`) are examples still
        call = re.compile(rf"\b(?:{names})\s*\(.*\)\s*(?:==>|==|➞|→|=>|->|returns?\b|should\b)")
        taken |= {i for i, text in enumerate(view) if call.search(text) and not text.startswith(("def ", "async "))}
        opened = re.compile(rf"^(?:{names})\s*\(")
        for i, text in enumerate(view):  # a call over several lines, then its value
            if opened.match(text) and i not in taken:
                end = next((j for j in range(i, min(i + 12, len(view))) if "==" in view[j] or "->" in view[j]), None)
                taken |= set(range(i, end + 1)) if end is not None else set()
    taken |= {i for i, text in enumerate(view) if _ARGUMENT_LINE.match(text)}  # "grid : [[0, 1]]" of an example
    return "\n".join(line for i, line in enumerate(lines) if i not in taken) + "\n"


def model_reads(problems: list[dict], out: str, phrasing: str) -> dict[str, dict]:
    """What the model read of each problem's rewritten examples where the patterns missed some, appended to `out`
    (one file per set of phrasings; the problems there are kept)."""
    from app.model_examples import ExampleReaderSettings, examples_request, read_examples, unread_calls
    from benchmarks.eval_humaneval import SHIPPED_ENGINE, append_sample, code_version, load_our_engine
    from engine import GenerationRequest

    done = read_samples(out)
    other = {r["set"] for r in done.values()} - {phrasing}
    if other:
        raise SystemExit(f"--reader {out} holds the reads of the set {other.pop()!r}: give each set a file of its own")
    gen = SHIPPED_ENGINE
    settings, engine = ExampleReaderSettings(), None
    for problem in problems:
        prompt = problem["checks_prompt"]
        name = list(top_level_functions(prompt))[-1]
        found = checks_for_prompt(prompt)
        if problem["task_id"] in done or not unread_calls(prompt, name, found):
            continue
        engine = engine or load_our_engine(gen)
        asked = examples_request(GenerationRequest(prompt, budget_s=gen.budget_s), name, settings)
        start = time.monotonic()
        result = engine.generate(asked)
        read = read_examples(asked, result, prompt, name, found)
        record = {
            "task_id": problem["task_id"],
            "set": phrasing,
            "checks": [c.as_dict() for c in read],
            "answer": result.candidates[0].text if result.candidates else "",
            "wall_s": round(time.monotonic() - start, 3),
            "code_version": code_version(),
        }
        append_sample(out, record)
        done[problem["task_id"]] = record
        print(f"{problem['task_id']}: {len(read)} examples read in {record['wall_s']:.1f} s", file=sys.stderr)
    return done


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", required=True)
    parser.add_argument("--exec-cache")
    parser.add_argument("--show", type=int, default=0, help="print this many rewritten prompts")
    parser.add_argument("--set", choices=SETS, default="newest", help="which phrasings (default: the newest set)")
    parser.add_argument(
        "--reader", help="the model reads the examples the patterns miss; its reads go to this file (one per set)"
    )
    parser.add_argument(
        "--write-stripped",
        help="write HumanEval with every docstring example taken out to this JSONL (eval_humaneval --problems)",
    )
    args = parser.parse_args(argv)
    if args.write_stripped:
        with open(args.write_stripped, "w", encoding="utf-8") as handle:
            for problem in load_problems():
                handle.write(json.dumps({**problem, "prompt": stripped(problem["prompt"])}) + "\n")
        return {}
    samples = {t: with_greedy_row(r) for t, r in read_samples(args.samples).items()}
    problems = [p for p in load_problems() if p["task_id"] in samples]
    styles = SETS[args.set]
    names = list(styles)
    rewritten, counts = [], {"examples": 0, "found_again": 0}
    for index, problem in enumerate(problems):
        prompt, n = (
            rephrased(problem["prompt"], names[index % len(names)], styles) if styles else (problem["prompt"], 0)
        )
        counts["examples"] += n
        counts["found_again"] += len(checks_for_prompt(prompt)) - (len(checks_for_prompt(problem["prompt"])) - n)
        rewritten.append({**problem, "checks_prompt": prompt})  # the hidden tests run as before (cached)
        if index < args.show:
            print(prompt)
    settings, ranker = EvalSettings(static=True, checks=True), [RankSettings()]
    label = RankSettings().label()
    print("== the original phrasing ==")
    original = evaluate(problems, samples, SandboxSettings(), settings, ranker, args.exec_cache)
    print("== rephrased ==")
    other = evaluate(rewritten, samples, SandboxSettings(), settings, ranker, args.exec_cache)
    summary = {
        "benchmark": "rephrase_examples",
        "set": args.set,
        "n_problems": len(problems),
        "original": original["rankers"][label]["mean"],
        "rephrased": other["rankers"][label]["mean"],
        "problems_with_checks": [original["checks"]["problems_with_checks"], other["checks"]["problems_with_checks"]],
        "examples_rewritten": counts["examples"],
        "examples_read_back": counts["found_again"],
        "cpu": cpu_description(),
    }
    print(
        f"Pass@First: original {100 * summary['original']:.1f}%, rephrased {100 * summary['rephrased']:.1f}% "
        f"({100 * (summary['rephrased'] - summary['original']):+.1f} pt); examples read back "
        f"{counts['found_again']} of {counts['examples']}"
    )
    if args.reader:
        summary["with_reader"] = with_reader(rewritten, samples, args, summary["original"])
    print(json.dumps(summary))
    return summary


def with_reader(rewritten: list[dict], samples: dict, args, original: float) -> dict:
    """The rephrased prompts' Pass@First with the examples the model read beside the patterns' (a third ranking)."""
    reads = model_reads(rewritten, args.reader, args.set)
    read = [{**p, "read_checks": reads.get(p["task_id"], {}).get("checks", [])} for p in rewritten]
    label = RankSettings().label()
    print("== rephrased, with the examples the model read ==")
    result = evaluate(read, samples, SandboxSettings(), EvalSettings(static=True, checks=True), [RankSettings()],
                      args.exec_cache)  # fmt: skip
    mean = result["rankers"][label]["mean"]
    summary = {
        "rephrased": mean,
        "problems_read": len(reads),
        "examples_read": sum(len(p["read_checks"]) for p in read),
        "read_s_p50": float(np.median([r["wall_s"] for r in reads.values()])) if reads else None,
    }
    print(
        f"with the model's reader: {100 * mean:.1f}% ({100 * (mean - original):+.1f} pt); the model read "
        f"{summary['examples_read']} examples on {summary['problems_read']} problems"
    )
    return summary


if __name__ == "__main__":
    main()
