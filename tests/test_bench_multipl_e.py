"""bench_multipl_e without models: MultiPL-E's records load whole and well formed, an app-style completion becomes
MultiPL-E's program, and a right and a wrong completion are told apart by the real toolchain in the sandbox."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import re
import shutil

import pytest

from benchmarks import bench_multipl_e as bench

# MultiPL-E's records as DeepSeek-Coder's commit a4ba628 holds them: tasks, git blob of the uncompressed file
SOURCE = {
    "js": (161, "f1b7a7a7ac64329ca5e73390e3403cf1bfb70d03"),
    "java": (158, "de28623cb7028728afb2b2e0771088ce216d198e"),
    "cpp": (161, "fa0ce63188051bdc839f5942aaea9b38ee3d20a5"),
    "rs": (156, "606c95516cdd838fb9383916a8d52a01684d478e"),
}
# HumanEval_23_strlen's body, ended where the app ends it (the function's closing brace)
STRLEN_RIGHT = {"js": "\n  return string.length;\n}", "cpp": "\n    return string.size();\n}"}
STRLEN_WRONG = {"js": "\n  return 1;\n}", "cpp": "\n    return 1;\n}"}


def _strlen(code: str) -> bench.Task:
    return next(t for t in bench.load_tasks(code) if t.name == "HumanEval_23_strlen")


@pytest.mark.parametrize("code", sorted(SOURCE))
def test_the_data_file_is_the_copy_named_in_multipl_e_md(code):
    raw = gzip.decompress(bench.TARGETS[code].data_path.read_bytes())
    n_tasks, blob = SOURCE[code]
    assert hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest() == blob
    tasks = bench.load_tasks(code)
    assert len(tasks) == n_tasks == len({t.name for t in tasks})
    assert all(t.prompt.rstrip().endswith("{") and t.tests.strip() and t.stop_tokens for t in tasks)


@pytest.mark.parametrize("code", sorted(SOURCE))
def test_every_prompt_is_well_formed(code):
    tasks = bench.load_tasks(code)
    assert [t.name for t in tasks if bench.doc_comment_problems(t)] == []
    assert bench.prompts_not_parsing(tasks) == []


@pytest.mark.parametrize("code", sorted(SOURCE))
def test_a_doc_comment_line_without_its_mark_is_found(code):
    task = _strlen(code)
    mark = bench.TARGETS[code].comment
    lost = dataclasses.replace(task, prompt=re.sub(re.escape(mark) + " ?Return length", "Return length", task.prompt))
    assert lost.prompt != task.prompt
    assert bench.doc_comment_problems(lost) == [line for line in lost.prompt.split("\n") if "Return length" in line]
    assert bench.prompts_not_parsing([lost]) == [task.name]


def test_the_program_is_multipl_e_s_harness_form():
    cpp = _strlen("cpp")
    program = bench.program_text(cpp, STRLEN_RIGHT["cpp"] + "\n\nint main() {}\n")
    assert program == cpp.prompt + "\n    return string.size();" + "\n" + cpp.tests  # the tests close the function
    java = _strlen("java")
    ended = "\n        return string.length();\n    }"  # the method's brace, no newline after it
    assert bench.truncate(ended, java.stop_tokens) == "\n        return string.length();"
    js = _strlen("js")
    assert bench.truncate(STRLEN_RIGHT["js"] + "\nconsole.log(1)", js.stop_tokens) == STRLEN_RIGHT["js"]


def test_a_draw_is_seeded_and_in_humaneval_order():
    tasks = bench.load_tasks("rs")
    first, again, other = (bench.draw(tasks, 5, seed) for seed in (3, 3, 4))
    assert first == again != other
    assert [t.number for t in first] == sorted(t.number for t in first)
    assert bench.draw(tasks, None, 0) == sorted(tasks, key=lambda t: t.number)


def test_the_requests_leave_the_language_to_the_app():
    task = _strlen("java")
    greedy = bench.request_body(task, "greedy", bench.Settings())
    ranked = bench.request_body(task, "ranked", bench.Settings(k=8, seed=100))
    assert (greedy["n"], greedy["temperature"], greedy["max_tokens"]) == (1, 0, 512)
    assert (ranked["n"], ranked["temperature"], ranked["seed"], ranked["budget_s"]) == (8, 0.8, 123, 60.0)
    assert greedy["prompt"] == ranked["prompt"] == task.prompt and "language" not in greedy | ranked


def test_only_a_finding_that_blames_the_prompt_is_a_false_parse():
    assert bench.false_parse_finding([{"kind": "syntax-error"}, {"kind": bench.PROMPT_SYNTAX_ERROR}])
    assert not bench.false_parse_finding([{"kind": "syntax-error"}, {"kind": "truncated"}])


def test_options_name_what_they_accept():
    args = bench.parse_args(["--languages", "js,rs", "--tasks", "1", "--k", "2", "--methods", "ranked"])
    assert (args.languages, args.tasks, args.k, args.methods) == (["js", "rs"], 1, 2, ["ranked"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--languages", "js,cobol"])


def test_the_cpu_is_described():
    cpu = bench.cpu_description()
    assert cpu["model"] and set(cpu["isa"]) <= {"AVX2", "AVX-512", "VNNI", "BF16", "AMX"}


@pytest.fixture(scope="module")
def scorer():
    from checks.sandbox import SandboxUnavailable

    try:
        made = bench.Scorer()
    except SandboxUnavailable as err:
        pytest.skip(f"no sandbox here: {err}")
    yield made
    made.close()


@pytest.mark.parametrize(
    "code, tool",
    [("js", "node"), pytest.param("cpp", "g++", marks=pytest.mark.skipif(not shutil.which("g++"), reason="no g++"))],
)
def test_a_right_completion_passes_and_a_wrong_one_fails(scorer, code, tool):
    if not shutil.which(tool):
        pytest.skip(f"no {tool} here")
    task = _strlen(code)
    right, wrong = scorer.score(code, [bench.program_text(task, c) for c in (STRLEN_RIGHT[code], STRLEN_WRONG[code])])
    assert (right.passed, right.status) == (True, "passed"), right.output
    assert (wrong.passed, wrong.status) == (False, "failed")
    broken = scorer.score(code, [bench.program_text(task, "\n  return string.length(;\n}")])[0]
    assert not broken.passed and broken.status == ("compile-error" if code == "cpp" else "failed")


def test_a_program_past_its_time_is_stopped(scorer, monkeypatch):
    if not shutil.which("node"):
        pytest.skip("no node here")
    monkeypatch.setattr(bench, "RUN_S", 1.0)
    endless = scorer.score("js", [bench.program_text(_strlen("js"), "\n  while (true) {}\n}")])[0]
    assert (endless.passed, endless.status) == (False, "run-timeout")
    assert endless.seconds < 10
