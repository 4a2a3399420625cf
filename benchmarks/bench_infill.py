"""Infill quality on HumanEval-Infilling through `POST /infill` (llama.cpp's protocol): our app and llama.cpp's
llama-server on the same tasks, one server at a time; every middle is judged by running the task's test in
benchmarks/sandbox.py.

The tasks are the official HumanEval-Infilling sets (Bavarian et al. 2022, github.com/openai/human-eval-infilling
at 88062ff, MIT; copied byte for byte into benchmarks/data/, see HUMAN_EVAL_INFILLING.md), by --kind: he-single
(1033 tasks: one whole line masked), he-multi (5815: every run of whole lines), he-span-light (164: one random
character span per problem) and he-span (1640: ten per problem). A task is used as it is published: input_prefix =
its prompt, input_suffix = its suffix, the cursor-line field empty, the canonical middle its canonical_solution;
the program judged is the harness's own, prompt + middle + suffix + "\n" + test + "\n" + "check(entry_point)".
--problems keeps the tasks of those HumanEval problems (default: all 164); --tasks N then draws N of them,
uniformly without replacement, seeded by --seed ("<seed>:tasks:<kind>"), in file order (the published score is a
mean over tasks, so a uniform draw estimates it without bias; long problems give more tasks); --tasks 0: all.

How a middle is cut (both servers may run on past the span, rewriting the suffix, then adding tests): he-single
keeps its first line and ends it with one newline (the published single-line middles all end in "\n", and their
suffix starts on the next line); he-multi and he-span* end, with --cut on, before the first later line that leaves
the function or repeats the suffix's first two code lines (or is the function's last code line and repeats the
first), keeping the newline before it (a one-line repeat would cut 83 canonical he-multi middles, which hold a line
equal to the suffix's first). Where a random span's suffix starts mid-line its first line is a fragment that rarely
matches, and the cut is then only the function's end. Every canonical middle of the four sets is left whole.

Per task and server: one greedy request (temperature 0, n_cmpl 1); for the servers of --sample-servers (default
ours) also --k sampled alternatives (temperature 0.8, top_p 0.95, n_cmpl k; ours answers them ranked, best first,
llama-server in its own order). Reported: greedy pass@1 per server; Pass@First (rank 1 passes) and Pass@All (any
of the k passes) per sampling server; --oracle also scores the canonical middles (100% means the tasks and cuts are
right); --servers none starts no server and loads no model (with --oracle: only the tasks' check). The JSON summary
names the kind, its source, the seed, the tasks' pool (after --problems) and how many were drawn.

Example: python -m benchmarks.bench_infill --kind he-multi --tasks 40 --seed 0 --k 8 --servers both
         python -m benchmarks.bench_infill --kind he-single --tasks 50 --servers none --oracle  (no model)
Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from benchmarks.infill_client import infill_body, post_infill, warmup_body
from benchmarks.sandbox import SandboxSettings, run_many
from benchmarks.servers import add_server_arguments, model_name, server_names, serving
from engine.quant.cpu import cpu_description

DATA = Path(__file__).resolve().parent / "data"
# the official HumanEval-Infilling sets (openai/human-eval-infilling at 88062ff), by kind
OFFICIAL = {
    "he-single": "HumanEval-SingleLineInfilling.jsonl.gz",
    "he-multi": "HumanEval-MultiLineInfilling.jsonl.gz",
    "he-span-light": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
    "he-span": "HumanEval-RandomSpanInfilling.jsonl.gz",
}


@dataclass(frozen=True)
class Task:
    """One task of an official set."""

    task_id: str  # its task_id, e.g. "MultiLineInfilling/HumanEval/3/L0_L2"
    problem: str  # the HumanEval problem, e.g. "HumanEval/3"
    prefix: str  # input_prefix: the task's prompt
    middle: str  # the canonical middle, as published
    suffix: str  # input_suffix: the task's suffix


def read_official(kind: str) -> list[dict]:
    """The rows of one official set, in file order: task_id, prompt, suffix, canonical_solution, test, entry_point."""
    with gzip.open(DATA / OFFICIAL[kind], "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def official_problem(row: dict) -> str:
    """'MultiLineInfilling/HumanEval/3/L0_L2' -> 'HumanEval/3'."""
    return "/".join(row["task_id"].split("/")[1:3])


def official_tasks(rows: list[dict], bounds: slice) -> tuple[list[Task], dict[str, dict]]:
    """The tasks of the problems HumanEval/<bounds>, and each problem's test and entry_point (the rows' own)."""
    tasks, problems = [], {}
    for row in rows:
        problem = official_problem(row)
        if not bounds.start <= int(problem.split("/")[1]) < bounds.stop:
            continue
        tasks.append(Task(row["task_id"], problem, row["prompt"], row["canonical_solution"], row["suffix"]))
        problems.setdefault(problem, {"test": row["test"], "entry_point": row["entry_point"]})
    return tasks, problems


def draw(tasks: list[Task], n: int, seed: int, kind: str) -> list[Task]:
    """n tasks drawn uniformly without replacement (seeded), kept in their order; n = 0 or more than there are: all."""
    if not n or n >= len(tasks):
        return tasks
    chosen = set(random.Random(f"{seed}:tasks:{kind}").sample(range(len(tasks)), n))
    return [task for index, task in enumerate(tasks) if index in chosen]


def official_program(prefix: str, middle: str, suffix: str, test: str, entry_point: str) -> str:
    """The human-eval-infilling harness's check program (execution.py), character for character."""
    return prefix + middle + suffix + "\n" + test + "\n" + f"check({entry_point})"


def parse_range(text: str, total: int) -> slice:
    """'0:20' (Python slice of the problems), '5' (the first five)."""
    start, _, end = text.partition(":") if ":" in text else ("0", ":", text)
    bounds = slice(int(start or 0), int(end) if end else total)
    if not 0 <= bounds.start <= total or bounds.stop < bounds.start:
        raise SystemExit(f"--problems {text!r} is out of range: HumanEval has problems 0..{total}")
    return bounds


# ---------------------------------------------------------------- asking and judging


def clean_middle(text: str, kind: str, suffix: str, cut: bool) -> str:
    """The middle as scored: he-single keeps its first line, ended by one newline (its suffix starts on the next
    line); with `cut`, a longer middle ends, keeping the newline before it (the suffix does not bring one), at the
    first later line that leaves the function (no indentation) or repeats the suffix's first two code lines (or is
    the middle's last code line in the function and repeats the suffix's first): a canonical middle may hold a line
    equal to the suffix's first (`return False`, `break`: 83 of he-multi's), and is then left whole."""
    if kind == "he-single":
        return text.split("\n", 1)[0] + "\n"
    if not cut:
        return text
    code = [line.rstrip() for line in suffix.split("\n") if line.strip()]
    lines = text.split("\n")

    def leaves(line: str) -> bool:
        return bool(line.strip()) and not line[:1].isspace()

    def repeats(index: int) -> bool:
        if not code or lines[index].rstrip() != code[0]:
            return False
        rest = []  # the middle's code lines from here to the end of the function, at most two
        for line in lines[index:]:
            if leaves(line) or len(rest) == 2:
                break
            if line.strip():
                rest.append(line.rstrip())
        return rest == code[:2] or len(rest) == 1

    for index, line in enumerate(lines[1:], start=1):
        if leaves(line) or repeats(index):
            return "\n".join(lines[:index]) + "\n"
    return text


def ask(server, tasks: list[Task], args) -> dict[str, dict]:
    """Per task: the greedy middle and, when this server samples, k sampled middles (server's order), with times."""
    answers = {}
    sample = server.name in args.sample_servers.split(",")
    with httpx.Client() as client:
        for number, task in enumerate(tasks):
            greedy_body = infill_body(
                task.prefix,
                task.suffix,
                "",
                k=1,
                n_predict=args.n_predict,
                temperature=0.0,
                top_p=1.0,
                top_k=0,
                samplers=None,
                t_max_predict_ms=args.t_max_predict_ms,
            )
            greedy = post_infill(client, server.url, greedy_body, timeout_s=args.timeout)
            answer = {
                "greedy": greedy.contents[:1],
                "greedy_s": greedy.seconds,
                "errors": [greedy.error] * bool(greedy.error),
            }
            if sample:
                body = infill_body(
                    task.prefix,
                    task.suffix,
                    "",
                    k=args.k,
                    n_predict=args.n_predict,
                    temperature=args.temperature,
                    top_p=args.top_p,
                    top_k=0,
                    samplers=["temperature", "top_p"],
                    t_max_predict_ms=args.t_max_predict_ms,
                )
                sampled = post_infill(client, server.url, body, timeout_s=args.timeout)
                answer.update({"sampled": sampled.contents, "sampled_s": sampled.seconds, "ranks": sampled.ranks})
                answer["errors"] += [sampled.error] * bool(sampled.error)
            answers[task.task_id] = answer
            print(
                f"  {server.name} {number + 1}/{len(tasks)} {task.task_id} greedy {greedy.seconds:.1f} s"
                + (f", k={args.k} {answer['sampled_s']:.1f} s" if sample else "")
                + (f" ERROR {answer['errors'][0]}" if answer["errors"] else ""),
                file=sys.stderr,
            )
    return answers


def judge(
    tasks: list[Task],
    middles: dict[str, list[str]],
    problems: dict[str, dict],
    kind: str,
    sandbox: SandboxSettings,
    cut: bool = True,
) -> dict[str, list[bool]]:
    """Whether each middle of each task passes its problem's test; each distinct program runs once, sandboxed."""
    programs: dict[str, str] = {}
    keys: dict[str, list[str]] = {}
    for task in tasks:
        problem = problems[task.problem]
        keys[task.task_id] = []
        for middle in middles.get(task.task_id, []):
            middle = clean_middle(middle, kind, task.suffix, cut)
            program = official_program(task.prefix, middle, task.suffix, problem["test"], problem["entry_point"])
            programs.setdefault(program, program)
            keys[task.task_id].append(program)
    distinct = list(programs)
    results = dict(zip(distinct, run_many(distinct, sandbox)))
    return {task_id: [results[p].passed for p in progs] for task_id, progs in keys.items()}


def rate(values: list[bool]) -> dict:
    return {"passed": sum(values), "n": len(values), "rate": round(sum(values) / len(values), 4) if values else None}


def score(
    server: str, tasks: list[Task], answers: dict[str, dict], problems: dict, args, sandbox: SandboxSettings
) -> dict:
    cut = args.cut == "on"
    greedy = judge(tasks, {t: a["greedy"] for t, a in answers.items()}, problems, args.kind, sandbox, cut)
    row = {
        "greedy_pass@1": rate([bool(greedy[t.task_id]) and greedy[t.task_id][0] for t in tasks]),
        "greedy_mean_s": round(sum(a["greedy_s"] for a in answers.values()) / len(answers), 3),
        "errors": sum(len(a["errors"]) for a in answers.values()),
    }
    if all("sampled" in a for a in answers.values()):
        sampled = judge(tasks, {t: a["sampled"] for t, a in answers.items()}, problems, args.kind, sandbox, cut)
        row["pass@first"] = rate([bool(sampled[t.task_id]) and sampled[t.task_id][0] for t in tasks])
        row["pass@all"] = rate([any(sampled[t.task_id]) for t in tasks])
        row["sampled_mean_s"] = round(sum(a["sampled_s"] for a in answers.values()) / len(answers), 3)
        row["first_is"] = "rank 1" if server == "ours" else "the server's first (unranked)"
    return row


def print_table(results: dict, kind: str, n_tasks: int, k: int) -> None:
    print(f"\nHumanEval-Infilling {OFFICIAL[kind]}: {n_tasks} tasks; Pass@First / Pass@All over k={k} sampled")
    print(
        f"{'server':<8}{'greedy pass@1':>15}{'Pass@First':>12}{'Pass@All':>10}{'greedy s':>10}{'k s':>8}{'errors':>8}"
    )
    for server, row in results.items():

        def pct(key, row=row):
            return f"{100 * row[key]['rate']:.1f}%" if row.get(key) and row[key]["rate"] is not None else "n/a"

        sampled_s = f"{row['sampled_mean_s']:.2f}" if "sampled_mean_s" in row else "n/a"
        greedy_s = f"{row['greedy_mean_s']:.2f}" if row.get("greedy_mean_s") is not None else "n/a"
        print(
            f"{server:<8}{pct('greedy_pass@1'):>15}{pct('pass@first'):>12}{pct('pass@all'):>10}"
            f"{greedy_s:>10}{sampled_s:>8}{row.get('errors', 0):>8}"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, checked; --n-predict by --kind where not given."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, conflict_handler="resolve"
    )
    add_server_arguments(parser)
    parser.add_argument(  # bench_editor's option, plus none (--oracle alone needs no server and no model)
        "--servers", default="both", choices=("ours", "llama", "both", "none")
    )
    parser.add_argument("--kind", default="he-single", choices=tuple(OFFICIAL))
    parser.add_argument("--problems", default="0:164", help="slice of HumanEval's 164 problems, e.g. 0:20")
    parser.add_argument("--tasks", type=int, default=0, help="draw this many of the tasks, seeded (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=8, help="sampled alternatives (n_cmpl)")
    parser.add_argument("--sample-servers", default="ours", help="servers asked for k samples too (ours,llama)")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument(
        "--n-predict", type=int, default=None, help="tokens per middle (default: 64 he-single, 128 the others)"
    )
    parser.add_argument("--t-max-predict-ms", type=int, default=60000)
    parser.add_argument("--exec-timeout", type=float, default=10.0, help="seconds per program in the sandbox")
    parser.add_argument(
        "--cut",
        default="on",
        choices=("on", "off"),
        help="he-multi, he-span*: end a middle where it leaves the function or repeats the suffix (default on)",
    )
    parser.add_argument("--oracle", action="store_true", help="also score the true middles")
    args = parser.parse_args(argv)
    args.n_predict = args.n_predict or (64 if args.kind == "he-single" else 128)
    if not 1 <= args.k <= 32:
        parser.error(f"--k {args.k} is out of range: 1..32")
    if args.tasks < 0:
        parser.error(f"--tasks {args.tasks} is out of range: 0 (all) or more")
    return args


def score_oracle(tasks: list[Task], problems: dict[str, dict], kind: str, sandbox: SandboxSettings) -> dict:
    """--oracle: the canonical middles judged as a server's greedy ones (100% means the tasks and cuts are right)."""
    judged = judge(tasks, {t.task_id: [t.middle] for t in tasks}, problems, kind, sandbox)
    return {"greedy_pass@1": rate([judged[t.task_id][0] for t in tasks])}


def run_servers(
    args: argparse.Namespace,
    model: str | None,
    tasks: list[Task],
    problems: dict[str, dict],
    sandbox: SandboxSettings,
    log_dir: str | None,
) -> tuple[dict, dict, dict]:
    """Each server in turn asked every task, then scored; (results by server, how each ran, answers by server)."""
    results, notes, all_answers = {}, {}, {}
    for name in server_names(args.servers) if args.servers != "none" else []:  # one at a time: two CPU cores
        slots = args.k if name in args.sample_servers.split(",") else 1
        warmup = warmup_body(slots, args.temperature)
        with serving(name, model, args, slots=slots, log_dir=log_dir, warmup=warmup) as server:
            notes[name] = server.report()
            all_answers[name] = ask(server, tasks, args)
        results[name] = score(name, tasks, all_answers[name], problems, args, sandbox)
    return results, notes, all_answers


def write_answers(path: str, tasks: list[Task], all_answers: dict[str, dict]) -> None:
    """--out: one JSON line per task, the task and every server's answers."""
    with open(path, "w", encoding="utf-8") as handle:
        for task in tasks:
            handle.write(json.dumps({**asdict(task), **{n: a[task.task_id] for n, a in all_answers.items()}}) + "\n")


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    pool, by_id = official_tasks(read_official(args.kind), parse_range(args.problems, 164))
    tasks = draw(pool, args.tasks, args.seed, args.kind)
    sandbox = SandboxSettings(timeout_s=args.exec_timeout)
    model = model_name(args.model) if args.servers != "none" else None
    log_dir = args.log_dir or (tempfile.mkdtemp(prefix="bench_infill-") if args.servers != "none" else None)
    results = {"oracle": score_oracle(tasks, by_id, args.kind, sandbox)} if args.oracle else {}
    served, notes, all_answers = run_servers(args, model, tasks, by_id, sandbox, log_dir)
    results.update(served)
    if args.out:
        write_answers(args.out, tasks, all_answers)
    print_table(results, args.kind, len(tasks), args.k)
    summary = {
        "benchmark": "bench_infill",
        "kind": args.kind,
        "model": model,
        "source": f"openai/human-eval-infilling@88062ff {OFFICIAL[args.kind]}",
        "problems": args.problems,
        "n_problems": len({t.problem for t in tasks}),
        "n_pool": len(pool),
        "tasks": args.tasks,
        "n_tasks": len(tasks),
        "seed": args.seed,
        "k": args.k,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "n_predict": args.n_predict,
        "cut": args.cut,
        "servers": notes,
        "results": results,
        "log_dir": log_dir,
    }
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
