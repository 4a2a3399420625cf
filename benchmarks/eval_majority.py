"""The majority rule on saved answers to requests in words without a check (issue 46, app/settled.py `Majority`):
what stopping the rows still growing once j of the k rows have ended does to the ranked first answer, and to the
steps the request waits for. Read from a bench_words --out file (its ours_ranked lines); no server is started.

Replayed as follows. Each task's k answers are taken to end in the order of their length in tokens (the bundled
tokenizer over the answer's code and example usage: rows grow together, at least a token a step). After the j-th
has ended, those j are ranked as the app ranks answers that carry no check of the request: the checks they state
themselves are gathered from them alone and each runs, without its own test code, on all of them in the sandbox
(app/stated.py: dual agreement), then by the score they were served with (their agreement with the other rows).
The first answer passes where its served verdict (MBPP's asserts) passed. A row that was cut by its token limit
never ends by itself: where fewer than j rows did, nothing stops at j and every row is ranked. Simplifications: the
rows stopped are left out (the app ranks them after the rows that ended), the served score is not recomputed over
the j rows, and the rule's wait for the greedy row is not modelled (the saved answers do not say which row was
greedy; it is usually among the shorter ones). With j = k the replay's first answer is checked against the served
one.

    python -m benchmarks.eval_majority WORDS.jsonl [WORDS2.jsonl ...]

Steps: the j-th answer's tokens over the longest answer's, averaged over the tasks. Prints a table and, as its last
line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import warnings

from app import stated
from checks.runner import CheckRunner
from engine.quant.cpu import cpu_description

TOKENIZER = "bundled:qwen2.5-coder-1.5b"


def answers(line: dict) -> list[tuple[str, float, bool, bool]]:
    """(program: code and example usage, served score, passed, ended by itself) of each of a ranked line's rows."""
    rows = []
    for candidate in line["candidates"]:
        ranked = candidate.get("ranked_drafts") or {}
        program = candidate["code"].rstrip("\n") + "\n" + (ranked.get("example_usage") or "")
        ended = ranked.get("finish_reason", "stop") == "stop"
        rows.append((program, float(ranked.get("score") or 0.0), bool(candidate["passed"]), ended))
    return rows


def first_of(programs: list[str], scores: list[float], checker) -> int:
    """Index of the answer ranked first among `programs` by their dual agreement on the checks they state, then
    their served score."""
    found = stated.gather(programs)
    agreement = [0.0] * len(programs)
    if found.items:
        agreement = stated.agreement(stated.cross_check(checker, programs, found, "python"))
    return min(range(len(programs)), key=lambda i: (-agreement[i], -scores[i]))


def replay(line: dict, count, checker) -> dict:
    """Per j (rows ended), whether the first answer passes and the j-th row's share of the longest row's tokens."""
    rows = answers(line)
    lengths = [count(program) for program, *_ in rows]
    order = sorted(range(len(rows)), key=lambda i: (not rows[i][3], lengths[i]))  # rows cut by their limit: last
    passes, shares = [], []
    for j in range(1, len(rows) + 1):
        if not rows[order[j - 1]][3] and j < len(rows):  # fewer than j rows ended by themselves: nothing stops here
            passes.append(None)
            shares.append(1.0)
            continue
        kept = order[:j]
        first = kept[first_of([rows[i][0] for i in kept], [rows[i][1] for i in kept], checker)]
        passes.append(rows[first][2])
        shares.append(lengths[order[j - 1]] / max(max(lengths), 1))
    passes = [passes[-1] if p is None else p for p in passes]  # where the rule cannot stop, every row is ranked
    return {"task_id": line["task_id"], "served": bool(line["passed"]), "passes": passes, "shares": shares}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="bench_words --out files (their ours_ranked lines are read)")
    parser.add_argument("--tokenizer", default=TOKENIZER, help="a model spec whose tokenizer counts the tokens")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=SyntaxWarning)  # the answers' own odd literals, parsed for their checks
    from transformers import AutoTokenizer

    from engine.models.loading import resolve_spec

    tokenizer = AutoTokenizer.from_pretrained(resolve_spec(args.tokenizer))
    checker = CheckRunner.create()
    runs = {}
    for path in args.files:
        with open(path, encoding="utf-8") as handle:
            lines = [json.loads(text) for text in handle if text.strip()]
        ranked = [
            line for line in lines if line.get("method") == "ours_ranked" and len(line.get("candidates") or []) > 1
        ]
        runs[path] = [replay(line, lambda text: len(tokenizer(text)["input_ids"]), checker) for line in ranked]
    table = {}
    print("file | tasks | served first passed | replay with every row agrees | j rows ended: first passed, steps")
    for path, tasks in runs.items():
        k = min(len(t["passes"]) for t in tasks)
        per_j = {
            j: (sum(t["passes"][j - 1] for t in tasks), sum(t["shares"][j - 1] for t in tasks) / len(tasks))
            for j in range(1, k + 1)
        }
        agree = sum(t["passes"][-1] == t["served"] for t in tasks)
        served = sum(t["served"] for t in tasks)
        cells = "  ".join(f"{j}: {p} {s:.2f}" for j, (p, s) in per_j.items())
        print(f"{path} | {len(tasks)} | {served} | {agree} | {cells}")
        table[path] = {"tasks": len(tasks), "served": served, "agree": agree, "per_j": per_j}
    summary = {"benchmark": "eval_majority", "cpu": cpu_description(), "runs": table}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
