"""MultiPL-E HumanEval in JavaScript, Java, C++ and Rust through our app's POST /v1/completions: a greedy answer
and the first of k ranked candidates per task, each scored as MultiPL-E scores it (prompt + completion + "\\n" +
the task's tests, built and run confined; exit status 0 passes), beside how often the app wrongly says the prompt
does not parse and whether it recognised the language.

    python -m benchmarks.bench_multipl_e --languages js,java,cpp,rs --k 8 --out multipl_e.jsonl
    python -m benchmarks.bench_multipl_e --languages js --tasks 20 --seed 1 --methods ranked

The data are MultiPL-E's prompt + tests records (benchmarks/data/MULTIPL_E.md: origin, licences, hashes). Programs
run in checks/sandbox.py's Sandbox (bubblewrap: no network, a private /sandbox and /tmp, only /usr and the
toolchain shown read-only, rlimits), each through a small Python driver that writes the files, builds (60 s) and
runs (15 s) with the toolchains on this machine. Nothing here is trained on: MultiPL-E's licence forbids it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from checks.toolchains import ToolMissing, tool_path
from engine.quant.cpu import cpu_description

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / "benchmarks" / "data"
JAVATUPLES_DIR = REPO / "checks" / "harness" / "javatuples"  # the checks' stand-ins for org.javatuples
BUILD_S = 60.0  # one program's build (g++, javac, rustc)
RUN_S = 15.0  # one program's run
METHODS = ("greedy", "ranked")
PROMPT_SYNTAX_ERROR = "prompt-syntax-error"  # static_eval.findings: "the prompt itself does not parse"


@dataclass(frozen=True)
class Target:
    """One MultiPL-E language: its data file, the comment mark its doc comments carry, where its program goes."""

    code: str  # MultiPL-E's: "js"
    language: str  # the id in languages.py: "javascript"
    comment: str  # every doc-comment line starts with it
    source: str  # the program's file name (Java's must be Problem.java: its tests hold `class Problem`'s main)

    @property
    def data_path(self) -> Path:
        return DATA_DIR / f"multipl_e_humaneval_{self.code}.jsonl.gz"


TARGETS = {
    t.code: t
    for t in (
        Target("js", "javascript", "//", "program.js"),
        Target("java", "java", "//", "Problem.java"),
        Target("cpp", "cpp", "//", "program.cpp"),
        Target("rs", "rust", "///", "program.rs"),
    )
}


# ---------------------------------------------------------------- the tasks


@dataclass(frozen=True)
class Task:
    """One MultiPL-E record: the prompt to complete, the tests that judge it, where MultiPL-E cuts a completion."""

    name: str  # "HumanEval_23_strlen"
    code: str  # MultiPL-E's language code
    prompt: str
    tests: str  # appended after the completion; the C-like ones begin by closing the function
    stop_tokens: tuple[str, ...]

    @property
    def number(self) -> int:
        """HumanEval's problem number (23 for HumanEval_23_strlen)."""
        return int(self.name.split("_")[1])


def load_tasks(code: str) -> list[Task]:
    """Every record of the language's data file, in file order."""
    with gzip.open(TARGETS[code].data_path, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [Task(r["name"], code, r["prompt"], r["tests"], tuple(r["stop_tokens"])) for r in records]


_HEADER = re.compile(r"^\s*(import |#include|use |class \w+ \{|\};\s*$)")  # imports, Java's class, a C++ union's end


def doc_comment_problems(task: Task) -> list[str]:
    """The doc-comment lines (between the header and the signature, the prompt's last line) without their comment
    mark; empty for a well-formed prompt. Some JSONL copies of MultiPL-E lost the marks."""
    lines = task.prompt.rstrip("\n").split("\n")
    first = max((i + 1 for i, line in enumerate(lines[:-1]) if _HEADER.match(line)), default=0)
    doc = [line for line in lines[first:-1] if line.strip()]
    if not doc:
        return ["(no doc comment above the signature)"]
    mark = TARGETS[task.code].comment
    return [line for line in doc if not line.lstrip().startswith(mark)]


def prompts_not_parsing(tasks: list[Task]) -> list[str]:
    """The tasks whose prompt static_eval (tree-sitter, as the app runs it) says does not parse alone."""
    from static_eval import AnalyzerSettings, StaticAnalyzer

    analyzer = StaticAnalyzer(AnalyzerSettings(lint=False, types=False))
    failing = []
    for task in tasks:
        report = analyzer.analyze(task.prompt, [""], language=TARGETS[task.code].language)[0]
        if not report.prompt_parses:
            failing.append(task.name)
    return failing


def draw(tasks: list[Task], n: int | None, seed: int) -> list[Task]:
    """`n` tasks drawn with `seed` (all without `n`), in HumanEval's order."""
    chosen = tasks if n is None or n >= len(tasks) else random.Random(seed).sample(tasks, n)
    return sorted(chosen, key=lambda t: t.number)


# ---------------------------------------------------------------- MultiPL-E's program


def truncate(completion: str, stop_tokens: tuple[str, ...]) -> str:
    """The completion cut before its first stop token, as MultiPL-E cuts its models' text. The app ends a
    completion where the function closes, so a stop token's closing newline may be past the text's end: the text
    is searched with one appended."""
    text = completion + "\n"
    cut = min((i for i in (text.find(token) for token in stop_tokens) if i >= 0), default=len(completion))
    return completion[:cut]


def program_text(task: Task, completion: str) -> str:
    """MultiPL-E's harness form: prompt + completion (cut at the stop tokens) + "\\n" + tests."""
    return task.prompt + truncate(completion, task.stop_tokens) + "\n" + task.tests


# ---------------------------------------------------------------- running programs confined

DRIVER = r"""
import json, os, subprocess, sys, time
SPEC = %(spec)r
def report(status, stage, returncode=None, seconds=0.0):
    with open(".output", "rb") as said_by_it:  # a stage's stdout + stderr (RLIMIT_FSIZE bounds it), its last part
        said_by_it.seek(max(0, os.path.getsize(".output") - 1500))
        output = said_by_it.read().decode("utf-8", "replace")
    said = {"status": status, "stage": stage, "returncode": returncode, "seconds": round(seconds, 3), "output": output}
    os.write(int(os.environ["REPORT_FD"]), json.dumps(said).encode("utf-8"))
    sys.exit(0)
for name, text in SPEC["files"].items():
    os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
    with open(name, "w", encoding="utf-8") as handle:
        handle.write(text)
for stage, argv, limit_s, failed in (("build", SPEC["build"], SPEC["build_s"], "compile-error"),
                                     ("run", SPEC["run"], SPEC["run_s"], "failed")):
    if not argv:
        continue
    started = time.monotonic()
    with open(".output", "wb") as sink:
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                  timeout=limit_s)
        except subprocess.TimeoutExpired:
            done = None
    if done is None:
        report(stage + "-timeout", stage, None, time.monotonic() - started)
    if done.returncode != 0:
        report(failed, stage, done.returncode, time.monotonic() - started)
report("passed", "run", 0, time.monotonic() - started)
"""


@dataclass(frozen=True)
class Toolchain:
    """How one language's programs are built and run inside the sandbox."""

    code: str
    build: tuple[str, ...]  # empty: nothing is built
    run: tuple[str, ...]
    binds: tuple[tuple[str, str], ...] = ()  # (host directory, where it is seen read-only inside)
    extra_files: dict[str, str] = field(default_factory=dict)  # written beside the program

    def driver(self, program: str) -> str:
        """The confined Python program that writes, builds and runs `program`."""
        spec = {
            "files": {TARGETS[self.code].source: program, **self.extra_files},
            "build": list(self.build),
            "build_s": BUILD_S,
            "run": list(self.run),
            "run_s": RUN_S,
        }
        return DRIVER % {"spec": spec}


def _under_usr(name: str) -> str:
    path = tool_path(name)
    if not path.startswith("/usr/"):
        raise ToolMissing(f"{name} is {path}, outside /usr (what the sandbox shows)")
    return path


def _jvm_flags(heap_mb: int) -> tuple[str, ...]:
    """The JVM within the sandbox's address space: a bounded heap, class and code space, one GC thread."""
    return (
        f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        "-XX:MaxMetaspaceSize=256m",
        "-XX:CompressedClassSpaceSize=128m",
        "-XX:ReservedCodeCacheSize=64m",
    )


def find_toolchain(code: str, sandbox) -> Toolchain:
    """The toolchain of MultiPL-E language `code` on this machine, as the sandbox sees it; ToolMissing says why
    not. The commands are MultiPL-E's (node; g++ -std=c++17; javac + java -ea; rustc --edition=2021)."""
    if code == "js":
        return Toolchain(code, (), (_under_usr("node"), "--max-old-space-size=1024", TARGETS[code].source))
    if code == "cpp":
        gpp = _under_usr("g++")
        return Toolchain(code, (gpp, "-std=c++17", "-w", "-o", "prog", TARGETS[code].source), ("./prog",))
    if code == "java":
        javac, java = _under_usr("javac"), _under_usr("java")
        stand_ins = sorted(JAVATUPLES_DIR.glob("*.java"))
        if not stand_ins:
            raise ToolMissing(f"no org.javatuples stand-ins in {JAVATUPLES_DIR} (every Java prompt imports it)")
        files = {f"org/javatuples/{p.name}": p.read_text(encoding="utf-8") for p in stand_ins}
        flags = _jvm_flags(1024)
        build = (javac, *(f"-J{f}" for f in flags), "-nowarn", "-encoding", "UTF-8", "-d", "classes")
        build += (TARGETS[code].source, *files)
        config = os.path.realpath(os.path.join(os.path.dirname(os.path.dirname(java)), "conf", "net.properties"))
        binds = ((os.path.dirname(config), os.path.dirname(config)),) if config.startswith("/etc/") else ()
        return Toolchain(code, build, (java, *flags, "-ea", "-cp", "classes", "Problem"), binds, files)
    if code == "rs":
        tool_path("rustc")
        try:  # rustup's rustc is a proxy: the toolchain is where --print sysroot says
            sysroot = subprocess.run(
                ["rustc", "--print", "sysroot"], capture_output=True, text=True, timeout=60, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError) as err:
            raise ToolMissing(f"rustc --print sysroot failed here ({err})") from None
        shown = sandbox.reachable(sysroot, tuple(p for p in ("bin", "lib", "libexec") if Path(sysroot, p).is_dir()))
        build = ("/opt/rust/bin/rustc", "--edition=2021", "--cap-lints=allow", f"-Clinker={_under_usr('cc')}")
        return Toolchain(code, (*build, "-o", "prog", TARGETS[code].source), ("./prog",), ((shown, "/opt/rust"),))
    raise ValueError(f"language {code!r}: choose from {', '.join(TARGETS)}")


@dataclass(frozen=True)
class Outcome:
    """How one program ended."""

    passed: bool
    status: str  # passed, failed, run-timeout, compile-error, build-timeout, sandbox-error, no-toolchain
    seconds: float  # the sandbox's wall time (build and run)
    output: str = ""  # the last of what the failing stage printed


class Scorer:
    """Builds and runs MultiPL-E programs in one sandbox, two at a time; toolchains found once per language."""

    def __init__(self):
        from checks.sandbox import Sandbox, SandboxLimits

        self.limits = SandboxLimits(
            wall_s=BUILD_S + RUN_S + 15.0,  # the driver's own start on top of both stages
            cpu_s=int(BUILD_S + RUN_S),  # per process: a build's or a run's CPU seconds
            memory_mb=4096,  # address space of each process: the JVM, cc1plus, rustc
            output_kb=65536,  # each file written (a Rust binary is a few MB)
            processes=256,  # the JVM's and rustc's threads, the linker
            disk_mb=256,
        )
        self.sandbox = Sandbox.create(self.limits)
        self._toolchains: dict[str, Toolchain | ToolMissing] = {}

    def toolchain(self, code: str) -> Toolchain | ToolMissing:
        if code not in self._toolchains:
            try:
                self._toolchains[code] = find_toolchain(code, self.sandbox)
            except ToolMissing as err:
                self._toolchains[code] = err
        return self._toolchains[code]

    def score(self, code: str, programs: list[str]) -> list[Outcome]:
        """Each program built and run confined; exit status 0 within the limits passes."""
        toolchain = self.toolchain(code)
        if isinstance(toolchain, ToolMissing):
            return [Outcome(False, "no-toolchain", 0.0, str(toolchain)) for _ in programs]
        ended = self.sandbox.run_many([toolchain.driver(p) for p in programs], binds=toolchain.binds)
        return [_outcome(confined) for confined in ended]

    def close(self) -> None:
        self.sandbox.close()


def _outcome(confined) -> Outcome:
    try:
        said = json.loads(confined.report)
    except ValueError:
        why = "killed at the wall clock" if confined.timed_out else f"exit {confined.returncode}"
        return Outcome(False, "sandbox-error", confined.wall_s, f"no report ({why}): {confined.output[-1000:]}")
    return Outcome(said["status"] == "passed", said["status"], round(confined.wall_s, 3), said["output"])


# ---------------------------------------------------------------- asking the app


@dataclass(frozen=True)
class Settings:
    """The requests of one run (the table says which)."""

    k: int = 8  # ranked: n
    temperature: float = 0.8  # ranked
    budget_s: float = 60.0  # ranked: the app's budget for the k candidates
    greedy_budget_s: float = 120.0  # greedy: the app's most, so greedy ends by its own stop, not the clock
    max_tokens: int = 512
    seed: int = 0  # ranked request seed = seed + HumanEval's number; also the draw of --tasks
    timeout_s: float = 900.0  # one answer over HTTP


def request_body(task: Task, method: str, settings: Settings) -> dict:
    """The /v1/completions body; no `language` field: the app recognises it."""
    if method == "greedy":
        return {
            "prompt": task.prompt,
            "n": 1,
            "temperature": 0,
            "max_tokens": settings.max_tokens,
            "budget_s": settings.greedy_budget_s,
        }
    return {
        "prompt": task.prompt,
        "n": settings.k,
        "temperature": settings.temperature,
        "seed": settings.seed + task.number,
        "max_tokens": settings.max_tokens,
        "budget_s": settings.budget_s,
    }


@dataclass
class Answer:
    """What the app answered one request, read for this benchmark."""

    completion: str  # the first choice's text
    seconds: float  # the request's wall time, client side
    findings: list[dict]  # the first choice's
    false_parse: bool  # some choice says the prompt does not parse (every MultiPL-E prompt does)
    language: str | None  # what the app took the prompt for (ranked_drafts.language.name)
    finish_reason: str | None  # the app's own (engine.types.FINISH_REASONS: "budget" where the clock cut it)
    error: str | None = None


def false_parse_finding(findings: list[dict]) -> bool:
    """A finding that blames the prompt for not parsing (static_eval's PROMPT_SYNTAX_ERROR)."""
    return any(f.get("kind") == PROMPT_SYNTAX_ERROR for f in findings)


def ask(client, url: str, task: Task, method: str, settings: Settings) -> Answer:
    import httpx

    started = time.monotonic()
    try:
        reply = client.post(url + "/v1/completions", json=request_body(task, method, settings))
    except httpx.HTTPError as err:
        return Answer("", time.monotonic() - started, [], False, None, None, f"{type(err).__name__}: {err}")
    seconds = time.monotonic() - started
    try:
        body = reply.json()
    except ValueError:
        body = {"error": reply.text[:500]}
    if reply.status_code != 200:
        return Answer("", seconds, [], False, None, None, f"{reply.status_code}: {body.get('error', body)}")
    choices = body["choices"]
    first = choices[0]
    return Answer(
        first["text"],
        seconds,
        first["ranked_drafts"]["findings"],
        any(false_parse_finding(c["ranked_drafts"]["findings"]) for c in choices),
        body["ranked_drafts"]["language"]["name"],
        first["ranked_drafts"]["finish_reason"],
    )


def warm_up(client, url: str) -> float:
    """An untimed first request: the model has loaded once it is answered."""
    started = time.monotonic()
    body = {"prompt": "function one() {", "n": 1, "temperature": 0, "max_tokens": 8}
    reply = client.post(url + "/v1/completions", json=body)
    if reply.status_code != 200:
        raise RuntimeError(f"the warm-up request was refused: {reply.status_code} {reply.text[:500]}")
    return time.monotonic() - started


# ---------------------------------------------------------------- the report


def summarize(rows: list[dict]) -> dict:
    """One language and method's figures from its rows."""
    n = len(rows)
    seconds = [r["seconds"] for r in rows]
    return {
        "tasks": n,
        "passed": sum(r["passed"] for r in rows),
        "pass_first": round(sum(r["passed"] for r in rows) / n, 4) if n else None,
        "false_parse_prompts": sum(r["false_parse"] for r in rows),
        "language_recognised": round(sum(r["language_recognised"] for r in rows) / n, 4) if n else None,
        "median_s": round(statistics.median(seconds), 2) if n else None,
        "errors": sum(r["error"] is not None for r in rows),
        "finish_reasons": dict(Counter(r["finish_reason"] for r in rows).most_common()),
        "statuses": dict(Counter(r["status"] for r in rows).most_common()),
    }


def print_table(code: str, results: dict[str, dict]) -> None:
    print(f"\n{TARGETS[code].language} (MultiPL-E humaneval-{code})")
    print(f"{'method':<8} {'tasks':>5} {'Pass@First':>11} {'false parse':>12} {'lang ok':>8} {'median s':>9}")
    for method, s in results.items():
        print(
            f"{method:<8} {s['tasks']:5d} {100 * s['pass_first']:10.1f}% {s['false_parse_prompts']:12d} "
            f"{100 * s['language_recognised']:7.1f}% {s['median_s']:9.2f}"
        )


def _described(toolchain: Toolchain | ToolMissing) -> str:
    if isinstance(toolchain, ToolMissing):
        return f"missing: {toolchain}"
    return shlex.join(toolchain.build) + " && " * bool(toolchain.build) + shlex.join(toolchain.run)


def data_report(code: str, tasks: list[Task]) -> dict:
    """Well-formedness of a language's whole file: doc-comment marks, and the prompts' parse by static_eval."""
    malformed = [t.name for t in tasks if doc_comment_problems(t)]
    return {
        "file": str(TARGETS[code].data_path.relative_to(REPO)),
        "tasks": len(tasks),
        "malformed_doc_comments": len(malformed),
        "malformed": malformed,
        "prompts_not_parsing": prompts_not_parsing(tasks),
    }


# ---------------------------------------------------------------- main


def run_language(code, tasks, methods, settings, client, url, scorer, out) -> dict[str, dict]:
    """Ask, score and record every task of one language; the figures per method."""
    rows: dict[str, list[dict]] = {m: [] for m in methods}
    for task in tasks:
        answers = {m: ask(client, url, task, m, settings) for m in methods}
        outcomes = scorer.score(code, [program_text(task, answers[m].completion) for m in methods])
        for method, outcome in zip(methods, outcomes):
            answer = answers[method]
            row = {
                "language": TARGETS[code].language,
                "task": task.name,
                "method": method,
                **asdict(answer),
                "language_recognised": answer.language == TARGETS[code].language,
                "passed": outcome.passed and answer.error is None,
                "status": outcome.status if answer.error is None else "request-error",
                "score_s": outcome.seconds,
                "output": outcome.output if not outcome.passed else "",
            }
            rows[method].append(row)
            if out is not None:
                out.write(json.dumps(row) + "\n")
                out.flush()
            print(f"  {code} {task.name} {method}: {row['status']} ({answer.seconds:.1f} s)", file=sys.stderr)
    return {method: summarize(method_rows) for method, method_rows in rows.items()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = Settings()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", default="js,java,cpp,rs", help=f"MultiPL-E codes, of {','.join(TARGETS)}")
    parser.add_argument("--tasks", type=int, default=None, help="tasks per language, a seeded draw (default: all)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="the draw's seed; ranked seed = this + task")
    parser.add_argument("--k", type=int, default=defaults.k, help="ranked: candidates per task (n)")
    parser.add_argument("--temperature", type=float, default=defaults.temperature, help="ranked: temperature")
    parser.add_argument("--budget", type=float, default=defaults.budget_s, help="ranked: budget_s per task")
    parser.add_argument("--greedy-budget", type=float, default=defaults.greedy_budget_s, help="greedy: budget_s")
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--methods", default=",".join(METHODS), help="greedy,ranked or one of them")
    parser.add_argument("--out", help="JSONL: one row per task and method (completion, passed, seconds, findings)")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="bundled target model")
    parser.add_argument(
        "--app-args",
        default="--draft bundled:qwen2.5-coder-0.5b",
        help="more app.py options (default: the bundled 0.5B draft, the app's default pair)",
    )
    parser.add_argument("--url", help="an app already serving (http://HOST:PORT) instead of starting one")
    parser.add_argument("--log-dir", help="the app's log (default: a temporary directory)")
    args = parser.parse_args(argv)
    args.languages = [c.strip() for c in args.languages.split(",") if c.strip()]
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [c for c in args.languages if c not in TARGETS] + [m for m in args.methods if m not in METHODS]
    if unknown or not args.languages or not args.methods:
        parser.error(f"unknown {unknown}: --languages takes {','.join(TARGETS)}, --methods {','.join(METHODS)}")
    if args.tasks is not None and args.tasks < 1:
        parser.error(f"--tasks {args.tasks}: give at least 1")
    return args


def main(argv: list[str] | None = None) -> dict:
    import httpx

    from benchmarks.servers import start_app

    args = parse_args(argv)
    settings = Settings(args.k, args.temperature, args.budget, args.greedy_budget, args.max_tokens, args.seed)
    tasks = {code: load_tasks(code) for code in args.languages}
    data = {code: data_report(code, all_tasks) for code, all_tasks in tasks.items()}
    for code, report in data.items():
        print(
            f"{code}: {report['tasks']} tasks, {report['malformed_doc_comments']} with doc-comment lines unmarked, "
            f"{len(report['prompts_not_parsing'])} prompts static_eval cannot parse",
            file=sys.stderr,
        )
    drawn = {code: draw(all_tasks, args.tasks, args.seed) for code, all_tasks in tasks.items()}
    scorer = Scorer()
    server = None if args.url else start_app(args.model, app_args=args.app_args, log_dir=args.log_dir)
    url = args.url or server.url
    out = open(args.out, "w", encoding="utf-8") if args.out else None  # closed below
    started = time.monotonic()
    try:
        with httpx.Client(timeout=settings.timeout_s) as client:
            warmup_s = warm_up(client, url)
            results = {}
            for code in args.languages:
                results[code] = run_language(code, drawn[code], args.methods, settings, client, url, scorer, out)
    finally:
        if out is not None:
            out.close()
        if server is not None:
            server.stop()
        scorer.close()
    for code, per_method in results.items():
        print_table(code, per_method)
    toolchains = {c: scorer.toolchain(c) for c in args.languages}
    summary = {
        "benchmark": "bench_multipl_e",
        "command": shlex.join(
            ["python", "-m", "benchmarks.bench_multipl_e", *(sys.argv[1:] if argv is None else argv)]
        ),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu_description(),
        "app": server.note if server is not None else url,
        "warmup_s": round(warmup_s, 2),
        "wall_s": round(time.monotonic() - started, 1),
        "settings": {**asdict(settings), "methods": args.methods, "tasks_per_language": args.tasks},
        "data": data,
        "toolchains": {c: _described(t) for c, t in toolchains.items()},
        "tasks": {c: [t.name for t in drawn[c]] for c in args.languages},
        "results": results,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
