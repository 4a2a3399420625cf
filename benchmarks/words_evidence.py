"""What the answers' own checks did in a bench_words run, read from its --out file (no server is started):

- ours_ranked as served, and the same samples ranked without the stated-agreement tier, or without the model's
  tests' agreement tier (the tails of `--model-tests continuation`): each task's answers reordered by the other tiers
  and what the ranking weighs after them (the static demotion, the score, the mean log-probability, as rerank.rank
  orders them), so the difference is that tier's alone;
- how many of our answers state checks of their own (checks/stated.py on each distinct answer's code and its example
  usage), and in how many tasks at least one answer does;
- llama_greedy's answers judged as given (their code block whole) and with their example usage apart, as our answers
  are shown (checks/stated.split_usage), each distinct program run in benchmarks/sandbox.py on all the task's asserts.

    python -m benchmarks.words_evidence words.jsonl

Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math

from app.evidence import KINDS
from benchmarks.bench_words import draw, hidden_program, percent, read_tasks
from benchmarks.mbpp_plus import read_answers
from benchmarks.sandbox import SandboxSettings, run_many
from checks.stated import split_usage, stated_checks
from engine.quant.cpu import cpu_description
from rerank import TIER
from rerank.rank import EMPTY_KIND


def _groups(line: dict) -> list[dict]:
    """The distinct answers of a ranked line (copies share a rank), best first as served."""
    by_rank = {}
    for candidate in line.get("candidates") or []:
        ranked = candidate.get("ranked_drafts") or {}
        by_rank.setdefault(ranked.get("rank"), {**candidate, "ranked": ranked})
    return [by_rank[rank] for rank in sorted(by_rank, key=lambda r: (r is None, r))]


def _number(value) -> float:
    return float(value) if value is not None and math.isfinite(value) else -math.inf


TIERS = tuple(kind.name for kind in KINDS if kind.role == TIER)  # the evidence's tiers, in the ranking's order


def without(line: dict, left_out: str) -> bool:
    """Whether the first answer passes when the answers are ordered without the tier `left_out` (one of TIERS)."""
    groups = _groups(line)
    if not groups:
        return bool(line.get("passed"))

    def key(group: dict):
        ranked = group["ranked"]
        demoted = ranked.get("parses") is False or any(f.get("kind") == EMPTY_KIND for f in ranked.get("findings", []))
        parts = ranked.get("score_parts") or {}
        tiers = [-_number(parts.get(name)) for name in TIERS if name != left_out]
        score = -_number(ranked.get("score"))
        return (*tiers, demoted, score, -_number(parts.get("mean_logprob")), ranked.get("rank"))

    return bool(min(groups, key=key)["passed"])


def stating(line: dict) -> tuple[int, int]:
    """(distinct answers that state checks of their own, distinct answers) of a ranked line."""
    groups = _groups(line)
    codes = [g["code"] + "\n" + (g["ranked"].get("example_usage") or "") for g in groups]
    return sum(bool(stated_checks(code)) for code in codes), len(codes)


def judged_apart(lines: dict[int, dict], tasks: dict, sandbox: SandboxSettings) -> list[bool]:
    """Each line's code judged with its example usage set apart (checks/stated.split_usage)."""
    programs = [hidden_program(tasks[task_id], split_usage(line["code"])[0]) for task_id, line in lines.items()]
    distinct = list(dict.fromkeys(programs))
    results = dict(zip(distinct, run_many(distinct, sandbox)))
    return [results[p].passed for p in programs]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="a bench_words --out file")
    parser.add_argument("--exec-timeout", type=float, default=10.0, help="seconds per program in the sandbox")
    args = parser.parse_args(argv)
    lines = read_answers(args.out)
    tasks = {t.task_id: t for t in draw(read_tasks(), 0, 0)}
    rows = {method: percent([bool(line["passed"]) for line in by_task.values()]) for method, by_task in lines.items()}
    ranked = lines.get("ours_ranked", {})
    if ranked:
        rows["ours_ranked without the stated checks (same samples)"] = percent(
            [without(line, "stated_agreement") for line in ranked.values()]
        )
        rows["ours_ranked without the model's tests (same samples)"] = percent(
            [without(line, "agreement") for line in ranked.values()]
        )
    if "llama_greedy" in lines:
        rows["llama_greedy, its example usage apart"] = percent(
            judged_apart(lines["llama_greedy"], tasks, SandboxSettings(timeout_s=args.exec_timeout))
        )
    counts = [stating(line) for line in ranked.values()]
    share = {
        "answers_stating_checks_percent": percent([i < s for s, n in counts for i in range(n)]),
        "tasks_with_a_stated_check_percent": percent([s > 0 for s, _ in counts]),
        "distinct_answers": sum(n for _, n in counts),
    }
    print(f"\n{args.out}: {len(ranked) or len(next(iter(lines.values()), {}))} tasks, Pass@First %")
    for name, value in rows.items():
        print(f"  {name:<58}{'n/a' if value is None else f'{value:.1f}':>8}")
    print(
        f"  distinct Python answers stating checks of their own: {share['answers_stating_checks_percent']}% of "
        f"{share['distinct_answers']}; tasks with at least one: {share['tasks_with_a_stated_check_percent']}%"
    )
    summary = {"benchmark": "words_evidence", "file": args.out, "cpu": cpu_description(), "pass@first": rows, **share}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
