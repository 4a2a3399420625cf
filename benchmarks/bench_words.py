"""Requests in words, scored as MBPP scores them: each MBPP task is asked the way a person types it to a chat
endpoint (POST /v1/chat/completions, OpenAI's body), and the code of the answer runs on the task's hidden tests.

The tasks are MBPP sanitized (Austin et al. 2021, 427 hand-verified tasks; benchmarks/data/mbpp_sanitized.jsonl.gz,
origin and licence in benchmarks/data/MBPP.md). A task is asked as its `prompt`, then the line "Your code should
pass this test:" and its first assert (exactly one example, as the MBPP paper's prompt gives); it is judged by all
of its asserts (test_list, after its test_imports), run after the candidate's code in benchmarks/sandbox.py: the
task passes when that program exits with status 0. With --examples none a task is asked as its sentence alone, then
"The function is `def name(params)`." (the reference's signature that the asserts call): no example, no value.

Methods (--methods, default all), one server at a time (--servers, default ours,llama: two CPU cores):
  ours_ranked    our app (python app.py, --model with its --draft; default the bundled 1.5B + 0.5B draft), n=--k,
                 temperature 0.8, budget_s 60; the first choice's ranked_drafts.code is the candidate
                 (Pass@First), and Pass@All counts a task whose answers hold any passing code
  ours_greedy    the same endpoint, n=1, temperature 0
  llama_greedy   llama.cpp's llama-server (benchmarks/servers.py start_llama_server, --llama-server BIN or
                 $LLAMA_SERVER, --threads) on the GGUF of the same bundled --model, its own chat template from the
                 GGUF; n=1, temperature 0; the candidate is the answer's first fenced code block (the whole text
                 where it has none)
Every request asks for at most --max-tokens tokens and carries seed --seed + task_id; each server first answers an
untimed warm-up request (our app has then loaded its models). Seconds are the client's wall clock per request.
--tasks N draws N tasks (seeded by --seed, kept in file order); 0: all 427. --plus FILE also judges each answer on
MBPP+ (EvalPlus's extra inputs, benchmarks/mbpp_plus.py), over the drawn tasks MBPP+ has. --oracle also scores the tasks'
reference code (100% means the prompts' programs are built right); --servers none starts no server.

Example: python -m benchmarks.bench_words --k 12 --out words.jsonl
         python -m benchmarks.bench_words --tasks 2 --k 2 --servers ours
Prints a table (cut: first answers that ended at max_tokens or the budget) and, as its last line, one JSON object
with the same numbers, the command line, the date and the CPU.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np

from benchmarks.mbpp_plus import judge_plus, plus_tests
from benchmarks.sandbox import SandboxSettings, run_many
from benchmarks.servers import LLAMA_SERVER, Server, bundled_gguf, model_name, start_app, start_llama_server
from engine.quant.cpu import cpu_description
from engine.text.answer import split_answer

DATA = Path(__file__).resolve().parent / "data" / "mbpp_sanitized.jsonl.gz"
SOURCE = "MBPP sanitized (Austin et al. 2021), 427 tasks: benchmarks/data/mbpp_sanitized.jsonl.gz (origin: MBPP.md)"
ONE_TEST = "Your code should pass this test:"
SIGNATURE = "The function is"  # --examples none: the line that names the function the hidden tests call
METHODS = ("ours_ranked", "ours_greedy", "llama_greedy")
SERVER_OF = {"ours_ranked": "ours", "ours_greedy": "ours", "llama_greedy": "llama"}
WARMUP = "Write a function to add two numbers.\nYour code should pass this test:\nassert add(2, 3) == 5"


# ---------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Task:
    """One MBPP task."""

    task_id: int  # MBPP's task_id (2..809 in the sanitized set)
    prompt: str  # the request in words, as published ("Write a function to ...")
    tests: tuple[str, ...]  # test_list: the asserts; the first is shown, all are run
    imports: tuple[str, ...]  # test_imports: lines the asserts need ("import math")
    reference: str  # the published solution (for --oracle)


def read_tasks(path: Path = DATA) -> list[Task]:
    """The tasks of a gzipped MBPP JSONL file, in file order."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [Task(r["task_id"], r["prompt"], tuple(r["test_list"]), tuple(r["test_imports"]), r["code"]) for r in rows]


def draw(tasks: list[Task], n: int, seed: int) -> list[Task]:
    """n tasks drawn uniformly without replacement (seeded), kept in file order; 0 or more than there are: all."""
    if not n or n >= len(tasks):
        return tasks
    chosen = set(random.Random(f"{seed}:mbpp").sample(range(len(tasks)), n))
    return [task for index, task in enumerate(tasks) if index in chosen]


def request_text(task: Task, examples: str = "one") -> str:
    """What the user types: the task, then one example (its first assert), as the MBPP paper's prompt shows them;
    `examples` "none": the task's sentence alone, then the signature its tests call (see `signature`)."""
    if examples == "none":
        return f"{task.prompt}\n{SIGNATURE} `{signature(task)}`."
    return f"{task.prompt}\n{ONE_TEST}\n{task.tests[0]}"


def signature(task: Task) -> str:
    """The first line of the reference's function that the first assert calls (`def name(a, b):` without the colon):
    the name and parameters the hidden tests need, and nothing of what they expect."""
    called = {
        n.func.id for n in ast.walk(ast.parse(task.tests[0])) if isinstance(n, ast.Call) and hasattr(n.func, "id")
    }
    for node in ast.walk(ast.parse(task.reference)):
        if isinstance(node, ast.FunctionDef) and node.name in called:
            return f"def {node.name}({ast.unparse(node.args)})"
    raise ValueError(f"task {task.task_id}: its first assert calls none of its reference's functions")


def hidden_program(task: Task, code: str) -> str:
    """The program judged: the candidate's code, the test imports, then every assert (pass = exit status 0)."""
    return "\n".join([code.rstrip("\n"), "", *task.imports, *task.tests]) + "\n"


def answer_code(text: str) -> str:
    """The candidate in a chat answer: its first fenced code block, or the whole text where it has none."""
    return split_answer(text).code or text


# ---------------------------------------------------------------- asking


@dataclass
class Answer:
    """One method's answer to one task, as the client saw it."""

    codes: list[str]  # candidates, best first (one for a greedy method; ours_ranked: every choice's code)
    seconds: float  # wall clock of the request on the client
    error: str = ""  # HTTP status and text of a refused request (no codes then)
    finish: str | None = None  # the first choice's finish_reason: "stop", or "length" where it was cut off
    ranked: list[dict] = field(default_factory=list)  # ours: each choice's ranked_drafts (why it ranks there)
    summary: dict | None = None  # ours: the reply's ranked_drafts (where the request's seconds went, the search)


def chat_body(task: Task, method: str, args: argparse.Namespace) -> dict:
    """The OpenAI chat completions body of `method` for `task` (our app's extra field: budget_s)."""
    ranked = method == "ours_ranked"
    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": request_text(task, args.examples)}],
        "n": args.k if ranked else 1,
        "temperature": args.temperature if ranked else 0.0,
        "max_tokens": args.max_tokens,
        "seed": args.seed + task.task_id,
        "stream": False,
    }
    if SERVER_OF[method] == "ours":
        body["budget_s"] = args.budget  # our extra field; an unknown model name is the app's default choice
    return body


def post_chat(client: httpx.Client, url: str, body: dict, timeout_s: float) -> tuple[dict | None, float, str]:
    """(the reply, seconds, "") or (None, seconds, why) for one POST /v1/chat/completions."""
    started = time.perf_counter()
    try:
        response = client.post(url + "/v1/chat/completions", json=body, timeout=timeout_s)
    except httpx.HTTPError as err:
        return None, time.perf_counter() - started, f"{type(err).__name__}: {err}"
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        return None, seconds, f"HTTP {response.status_code}: {response.text[:300]}"
    return response.json(), seconds, ""


def reply_codes(reply: dict, server: str) -> list[str]:
    """The candidates of a chat reply in its order: ours ranked_drafts.code of each choice, llama-server's the
    answer's code block."""
    choices = reply.get("choices") or []
    if server == "ours":
        return [(c.get("ranked_drafts") or {}).get("code") or "" for c in choices]
    return [answer_code(c.get("message", {}).get("content") or "") for c in choices]


def ask(server: Server, method: str, tasks: list[Task], args: argparse.Namespace) -> dict[int, Answer]:
    """Every task asked of `server` as `method`, one request at a time."""
    answers = {}
    with httpx.Client() as client:
        for number, task in enumerate(tasks, start=1):
            reply, seconds, error = post_chat(client, server.url, chat_body(task, method, args), args.timeout)
            codes = reply_codes(reply, server.name) if reply else []
            choices = (reply or {}).get("choices") or [{}]
            ranked = [c.get("ranked_drafts") or {} for c in choices] if server.name == "ours" and reply else []
            summary = reply.get("ranked_drafts") if server.name == "ours" and reply else None
            answers[task.task_id] = Answer(codes, seconds, error, choices[0].get("finish_reason"), ranked, summary)
            print(
                f"  {method} {number}/{len(tasks)} task {task.task_id}: {seconds:.1f} s, {answers[task.task_id].finish}"
                + (f" ERROR {error}" if error else ""),
                file=sys.stderr,
            )
    return answers


# ---------------------------------------------------------------- judging


def judge(tasks: list[Task], answers: dict[int, Answer], sandbox: SandboxSettings) -> dict[int, list[bool]]:
    """Whether each candidate of each task passes all its asserts; each distinct program runs once, sandboxed."""
    programs = {task.task_id: [hidden_program(task, code) for code in answers[task.task_id].codes] for task in tasks}
    distinct = list(dict.fromkeys(p for progs in programs.values() for p in progs))
    results = dict(zip(distinct, run_many(distinct, sandbox))) if distinct else {}
    return {task_id: [results[p].passed for p in progs] for task_id, progs in programs.items()}


def percent(flags: list[bool]) -> float | None:
    return round(100 * sum(flags) / len(flags), 1) if flags else None


def summarize(method: str, answers: dict[int, Answer], verdicts: dict[int, list[bool]]) -> dict:
    """A method's row: Pass@First % (and Pass@All % for a ranked one), median and p90 seconds, tasks, errors."""
    seconds = [a.seconds for a in answers.values()]
    median, p90 = np.percentile(seconds, [50, 90]) if seconds else (None, None)
    row = {
        "pass@first": percent([bool(v) and v[0] for v in verdicts.values()]),
        "passed": sum(bool(v) and v[0] for v in verdicts.values()),
        "median_s": None if median is None else round(float(median), 2),
        "p90_s": None if p90 is None else round(float(p90), 2),
        "n_tasks": len(verdicts),
        "errors": sum(bool(a.error) for a in answers.values()),
        "cut": sum(a.finish == "length" for a in answers.values()),  # first answers cut off (tokens or budget)
    }
    if method == "ours_ranked":
        row["pass@all"] = percent([any(v) for v in verdicts.values()])
        row["distinct_codes_per_task"] = round(float(np.mean([len(set(a.codes)) for a in answers.values()])), 2)
    return row


def plus_rows(run: Run, tests: dict[int, str], sandbox: SandboxSettings) -> dict[str, dict]:
    """--plus: per method, over the drawn tasks MBPP+ has, Pass@First on MBPP+ (and Pass@All for a ranked one)."""
    rows = {}
    for method, answers in run.answers.items():
        verdicts = judge_plus({task_id: answer.codes for task_id, answer in answers.items()}, tests, sandbox)
        rows[method] = {"pass@first+": percent([bool(v) and v[0] for v in verdicts.values()]), "n_plus": len(verdicts)}
        if any(len(v) > 1 for v in verdicts.values()):  # a ranked method: any passing answer
            rows[method]["pass@all+"] = percent([any(v) for v in verdicts.values()])
    return rows


def oracle(tasks: list[Task], sandbox: SandboxSettings) -> tuple[dict, dict]:
    """--oracle: the reference solutions judged as answers (no server)."""
    answers = {task.task_id: Answer([task.reference], 0.0) for task in tasks}
    row = summarize("reference", answers, judge(tasks, answers, sandbox))
    return answers, row | {"median_s": None, "p90_s": None}  # nothing was asked


# ---------------------------------------------------------------- servers


def start(name: str, args: argparse.Namespace, log_dir: str) -> Server:
    """Our app on --model with its --draft, or llama-server on that model's bundled GGUF (one slot)."""
    model = model_name(args.model)
    if name == "ours":
        draft = "" if args.draft == "none" else f"--draft bundled:{model_name(args.draft)}"
        return start_app(model, app_args=f"{draft} {args.app_args}".strip(), log_dir=log_dir)
    return start_llama_server(
        bundled_gguf(model),
        binary=args.llama_server,
        slots=1,
        ctx_per_slot=args.ctx,
        threads=args.threads,
        extra_args=args.llama_args,
        log_dir=log_dir,
    )


@contextmanager
def serving(name: str, args: argparse.Namespace, log_dir: str) -> Iterator[Server]:
    """Server `name` started, its untimed warm-up answered (the app's models are loaded then), stopped on leaving."""
    started = time.monotonic()
    server = start(name, args, log_dir)
    try:
        warmup = {"messages": [{"role": "user", "content": WARMUP}], "n": 1, "temperature": 0.0, "max_tokens": 64}
        with httpx.Client() as client:
            _, server.warmup_s, error = post_chat(client, server.url, warmup, timeout_s=max(args.timeout, 1800))
        if error:
            raise RuntimeError(f"{name}: the warm-up request was refused: {error}\n{server.log_tail()}")
        server.ready_s = time.monotonic() - started
        yield server
    finally:
        server.stop()


@dataclass
class Run:
    """What a run gathered: per method, the answers and verdicts; per server, how it ran."""

    answers: dict[str, dict[int, Answer]] = field(default_factory=dict)
    verdicts: dict[str, dict[int, list[bool]]] = field(default_factory=dict)
    servers: dict[str, dict] = field(default_factory=dict)


def run_methods(args: argparse.Namespace, tasks: list[Task], sandbox: SandboxSettings, log_dir: str | None) -> Run:
    """Each server in turn (ours, then llama) asked every task by each of its methods, then the answers judged."""
    run = Run()
    for name in args.servers:
        methods = [m for m in args.methods if SERVER_OF[m] == name]
        if not methods:
            continue
        with serving(name, args, log_dir) as server:
            run.servers[name] = server.report()
            for method in methods:
                run.answers[method] = ask(server, method, tasks, args)
        for method in methods:
            run.verdicts[method] = judge(tasks, run.answers[method], sandbox)
    return run


# ---------------------------------------------------------------- report


def write_answers(path: str, tasks: list[Task], run: Run) -> None:
    """--out: one JSON line per task and method: the candidate, whether it passed, the seconds (and every
    candidate with its verdict, and ours its ranked_drafts, for a method with several)."""
    with open(path, "w", encoding="utf-8") as handle:
        for task in tasks:
            for method, answers in run.answers.items():
                answer, verdicts = answers[task.task_id], run.verdicts[method][task.task_id]
                line = {
                    "task_id": task.task_id,
                    "method": method,
                    "code": answer.codes[0] if answer.codes else "",
                    "passed": bool(verdicts) and verdicts[0],
                    "seconds": round(answer.seconds, 3),
                    "finish_reason": answer.finish,
                    "error": answer.error or None,
                }
                if answer.summary is not None:
                    line["ranked_drafts"] = answer.summary
                if len(answer.codes) > 1:
                    line["candidates"] = [{"code": c, "passed": v} for c, v in zip(answer.codes, verdicts)]
                    for candidate, ranked in zip(line["candidates"], answer.ranked):
                        candidate["ranked_drafts"] = ranked
                handle.write(json.dumps(line) + "\n")


def print_table(results: dict[str, dict], n_tasks: int, examples: str = "one") -> None:
    asked = "with one assert" if examples == "one" else "without an example (the sentence and the signature)"
    print(f"\nMBPP sanitized, requests in words {asked}: {n_tasks} tasks; Pass@First = the first answer passes every")
    print("assert")
    print(
        f"{'method':<14}{'Pass@First':>11}{'Pass@All':>10}{'median s':>10}{'p90 s':>8}{'n tasks':>9}{'cut':>5}"
        f"{'errors':>8}"
    )
    for method, row in results.items():

        def cell(key: str, unit: str = "", row: dict = row) -> str:
            return "n/a" if row.get(key) is None else f"{row[key]:.1f}{unit}" if unit else f"{row[key]:.2f}"

        print(
            f"{method:<14}{cell('pass@first', '%'):>11}{cell('pass@all', '%'):>10}{cell('median_s'):>10}"
            f"{cell('p90_s'):>8}{row['n_tasks']:>9}{row['cut']:>5}{row['errors']:>8}"
        )
    plus = {method: row for method, row in results.items() if "pass@first+" in row}
    if plus:
        print("\nMBPP+ (EvalPlus's base and extra inputs against the reference), over the drawn tasks MBPP+ has")
        print(f"{'method':<14}{'Pass@First+':>12}{'Pass@All+':>10}{'n tasks':>9}")
        for method, row in plus.items():
            first, every = (row.get(key) for key in ("pass@first+", "pass@all+"))
            cells = [f"{value}%" if value is not None else "n/a" for value in (first, every)]
            print(f"{method:<14}{cells[0]:>12}{cells[1]:>10}{row['n_plus']:>9}")


# ---------------------------------------------------------------- command line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, checked; --methods and --servers as lists."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma list of {', '.join(METHODS)}")
    parser.add_argument("--servers", default="ours,llama", help="comma list of ours, llama (in that order); or none")
    parser.add_argument("--tasks", type=int, default=0, help="draw this many tasks, seeded by --seed (0: all 427)")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed; request seed = this + task_id")
    parser.add_argument(
        "--examples",
        choices=("one", "none"),
        default="one",
        help="one: the task and its first assert (MBPP's prompt); none: the task's sentence and the signature alone",
    )
    parser.add_argument("--k", type=int, default=12, help="answers ours_ranked asks for (n)")
    parser.add_argument("--temperature", type=float, default=0.8, help="ours_ranked's temperature")
    parser.add_argument("--max-tokens", type=int, default=512, help="max_tokens of every request")
    parser.add_argument("--budget", type=float, default=60.0, help="our app's budget_s per request, seconds")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="bundled target model (both servers)")
    parser.add_argument("--draft", default="qwen2.5-coder-0.5b", help="our app's bundled draft model, or none")
    parser.add_argument("--app-args", default="", help="more app.py options")
    parser.add_argument(
        "--llama-server", default=os.environ.get("LLAMA_SERVER") or str(LLAMA_SERVER), help="llama-server binary"
    )
    parser.add_argument("--llama-args", default="", help="more llama-server options")
    parser.add_argument("--threads", type=int, default=2, help="llama-server threads")
    parser.add_argument("--ctx", type=int, default=4096, help="llama-server context (one slot)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for one answer")
    parser.add_argument("--exec-timeout", type=float, default=10.0, help="seconds per program in the sandbox")
    parser.add_argument("--plus", help="MbppPlus-OriginFmt.jsonl.gz (evalplus/mbppplus_release): judge on MBPP+ too")
    parser.add_argument("--oracle", action="store_true", help="also score the tasks' reference code")
    parser.add_argument("--log-dir", help="servers' logs (default: a temporary directory)")
    parser.add_argument("--out", help="write every answer (per task and method: code, passed, seconds) to this JSONL")
    args = parser.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    args.servers = [] if args.servers == "none" else [s for s in ("ours", "llama") if s in args.servers.split(",")]
    if unknown := sorted(set(args.methods) - set(METHODS)):
        parser.error(f"--methods {','.join(unknown)}: choose from {', '.join(METHODS)}")
    if not 1 <= args.k <= 32:
        parser.error(f"--k {args.k} is out of range: 1..32")
    if args.tasks < 0:
        parser.error(f"--tasks {args.tasks} is out of range: 0 (all) or more")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    tasks = draw(read_tasks(), args.tasks, args.seed)
    sandbox = SandboxSettings(timeout_s=args.exec_timeout)
    plus = plus_tests(args.plus) if args.plus else None  # read first: a wrong path says so before hours of asking
    log_dir = args.log_dir or (tempfile.mkdtemp(prefix="bench_words-") if args.servers else None)
    results = {}
    if args.oracle:
        _, results["reference"] = oracle(tasks, sandbox)
    run = run_methods(args, tasks, sandbox, log_dir)
    results.update({method: summarize(method, run.answers[method], run.verdicts[method]) for method in run.answers})
    if args.out:
        write_answers(args.out, tasks, run)
    if plus is not None:
        for method, row in plus_rows(run, plus, sandbox).items():
            results[method].update(row)
    print_table(results, len(tasks), args.examples)
    summary = {
        "benchmark": "bench_words",
        "command": shlex.join(["python", "-m", "benchmarks.bench_words", *(sys.argv[1:] if argv is None else argv)]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu_description(),
        "source": SOURCE,
        "n_tasks": len(tasks),
        "task_ids": [t.task_id for t in tasks] if args.tasks else "all",
        "seed": args.seed,
        "examples": args.examples,
        "k": args.k,
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "budget_s": args.budget,
        "model": args.model,
        "draft": args.draft,
        "servers": run.servers,
        "results": results,
        "log_dir": log_dir,
        "settings": {key: value for key, value in vars(args).items() if key in {"threads", "ctx", "exec_timeout"}},
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
