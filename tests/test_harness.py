"""The execution sandbox and the HumanEval harness, on real problems with known-good and known-bad candidates."""

import gzip
import json
from dataclasses import dataclass, field

import pytest

from benchmarks import eval_humaneval as harness
from benchmarks.sandbox import FAILED, PASSED, TIMEOUT, SandboxSettings, check_program, run_many, run_program

FAST = SandboxSettings(timeout_s=2.0, memory_mb=512)


def test_sandbox_passes_a_right_answer_and_fails_a_wrong_one():
    good, bad = run_many(["assert sum([1, 2]) == 3\n", "assert sum([1, 2]) == 4\n"], FAST)
    assert good.status == PASSED
    assert bad.status == FAILED and "AssertionError" in bad.detail


def test_sandbox_times_out_an_infinite_loop():
    result = run_program("while True:\n    pass\n", FAST)
    assert result.status == TIMEOUT
    assert 2.0 <= result.wall_s < 5.0


def test_sandbox_stops_a_memory_bomb():
    at_once = run_program("x = [None] * (4 * 1024 ** 3)\n", FAST)  # 32 GB of pointers
    assert at_once.status == FAILED and "MemoryError" in at_once.detail
    growing = run_program(
        "blocks = []\nwhile True:\n    blocks.append(bytearray(16 * 1024 * 1024))\n",
        SandboxSettings(timeout_s=20.0, memory_mb=256),
    )
    assert growing.status == FAILED and "MemoryError" in growing.detail


def test_sandbox_runs_outside_this_process():
    result = run_program("import os, sys\nsys.exit(0 if os.getppid() != 0 else 1)\n", FAST)
    assert result.status == PASSED
    marker = run_program("import builtins\nbuiltins.LEAKED = 1\n", FAST)
    assert marker.status == PASSED and not hasattr(__builtins__, "LEAKED")


def test_sandbox_reports_its_network_isolation_honestly():
    result = run_program("import socket\nsocket.create_connection(('10.255.255.1', 80), timeout=1)\n", FAST)
    assert result.status in (FAILED, TIMEOUT)
    if result.network_isolated:
        assert "unreachable" in result.detail.lower()


def _problems():
    return harness.load_problems(None, 0, 2)  # HumanEval/0 and HumanEval/1


def _write_samples(path, problems):
    good0 = problems[0]["canonical_solution"]
    bad0 = "    return False\n"
    good1 = problems[1]["canonical_solution"]
    loop1 = "    while True:\n        pass\n"
    records = [
        {
            "task_id": problems[0]["task_id"],
            "prompt": problems[0]["prompt"],
            "candidates": [_cand(good0), _cand(good0), _cand(good0 + "\n"), _cand(bad0, -0.01)],
            "greedy": _cand(bad0),
        },
        {
            "task_id": problems[1]["task_id"],
            "prompt": problems[1]["prompt"],
            "candidates": [_cand(loop1, -0.01), _cand(good1), _cand(good1), _cand("    return []\n")],
            "greedy": _cand(good1),
        },
    ]
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def _cand(text, logprob=-0.5):
    return {"text": text, "token_ids": [], "logprobs": [logprob] * max(1, len(text) // 4), "finish_reason": "stop"}


def test_harness_scores_known_good_and_bad_candidates(tmp_path, capsys):
    problems = _problems()
    samples = tmp_path / "samples.jsonl.gz"
    _write_samples(samples, problems)
    summary = harness.main(
        [
            "--samples",
            str(samples),
            "--end",
            "2",
            "--timeout",
            "2",
            "--bootstrap",
            "200",
            "--results",
            str(tmp_path / "rows.jsonl"),
        ]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[-1]) == json.loads(json.dumps(summary))  # the JSON line is last
    assert any("Pass@First" in line for line in lines)
    assert summary["n_problems"] == 2 and summary["k"] == 4
    assert summary["pass_all"]["mean"] == 1.0
    assert summary["random_pick"]["mean"] == pytest.approx((3 / 4 + 2 / 4) / 2)
    assert summary["greedy"]["mean"] == 0.5
    assert summary["timeouts"] == 1
    gsc = summary["rankers"]["gsc/ngram_overlap/1-2/bin"]
    assert gsc["mean"] == 1.0 and gsc["ci95"][0] <= gsc["mean"] <= gsc["ci95"][1]
    assert summary["rankers"]["mean_logprob"]["mean"] == 0.0  # the confident candidates are the wrong ones
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert rows[1]["statuses"][0] == TIMEOUT and rows[0]["passed"] == [True, True, True, False]


def test_check_program_is_humaneval_s():
    program = check_program("def f():\n", "    return 1\n", "def check(c):\n    assert c() == 1\n", "f")
    assert program.rstrip().endswith("check(f)")
    assert run_program(program, FAST).status == PASSED


@dataclass
class _FakeStats:
    tokens_per_s: float = 1.0

    def as_dict(self):
        return {"tokens_per_s": self.tokens_per_s}


@dataclass
class _FakeCandidate:
    text: str
    token_ids: list = field(default_factory=lambda: [1, 2])
    logprobs: list = field(default_factory=lambda: [-0.1, -0.2])
    finish_reason: str = "stop"
    tail: str | None = None


@dataclass
class _FakeResult:
    candidates: list
    stats: _FakeStats = field(default_factory=_FakeStats)


class _FakeEngine:
    """Stands in for engine.Engine: records the requests it gets."""

    def __init__(self):
        self.requests = []

    def generate(self, request):
        self.requests.append(request)
        return _FakeResult([_FakeCandidate(f"    return {i}\n") for i in range(request.k)])


def test_generation_appends_per_problem_and_resumes(tmp_path):
    pytest.importorskip("engine.types")
    problems = _problems()
    out = tmp_path / "gen.jsonl.gz"
    engine = _FakeEngine()
    gen = harness.GenerationSettings(k=3, budget_s=5.0)
    harness.generate_samples(problems[:1], gen, out, engine=engine)
    harness.generate_samples(problems, gen, out, engine=engine)  # resumes: only the second problem is new
    records = harness.read_samples(out)
    assert list(records) == [p["task_id"] for p in problems]
    assert [r.k for r in engine.requests] == [3, 1, 3, 1]  # k candidates, then the greedy one
    assert engine.requests[1].temperature == 0.0 and engine.requests[0].temperature == 0.8
    record = records[problems[1]["task_id"]]
    assert len(record["candidates"]) == 3 and record["greedy"]["text"] == "    return 0\n"
    assert record["settings"]["k"] == 3 and record["code_version"]
    assert {"text", "token_ids", "logprobs", "finish_reason"} <= set(record["candidates"][0])


def test_budget_snapshots_are_what_the_stream_held_at_each_budget(tmp_path):
    from engine import Engine, EngineSettings
    from engine.models.tiny import byte_tokenizer, tiny_model

    engine = Engine(tiny_model(0), byte_tokenizer(), settings=EngineSettings(drafter="none"))
    problems = _problems()
    gen = harness.GenerationSettings(
        model="tiny:0", drafter="none", k=2, max_new_tokens=600, greedy=False, stop_at_body_end=False
    )  # random weights rarely indent a body
    paths = {0.05: str(tmp_path / "b0.05.jsonl.gz"), 30.0: str(tmp_path / "b30.jsonl.gz")}
    harness.generate_budget_snapshots(problems, gen, paths, engine)
    short, full = harness.read_samples(paths[0.05]), harness.read_samples(paths[30.0])
    assert list(short) == list(full) == [p["task_id"] for p in problems]
    for task_id in full:
        assert short[task_id]["settings"]["budget_s"] == 0.05 and full[task_id]["settings"]["budget_s"] == 30.0
        for early, late in zip(short[task_id]["candidates"], full[task_id]["candidates"]):
            assert late["token_ids"][: len(early["token_ids"])] == early["token_ids"]  # the same sample, earlier
            assert early["finish_reason"] in ("stop", "length", "budget") and late["finish_reason"] != "budget"
        short_tokens = sum(len(c["token_ids"]) for c in short[task_id]["candidates"])
        assert short[task_id]["stats"]["generated_tokens"] == short_tokens
        assert short[task_id]["stats"]["wall_s"] <= full[task_id]["stats"]["wall_s"]
    assert sum(len(c["token_ids"]) for r in short.values() for c in r["candidates"]) < sum(
        len(c["token_ids"]) for r in full.values() for c in r["candidates"]
    )
    harness.generate_budget_snapshots(problems, gen, paths, engine=None)  # resumes: nothing left, nothing loaded


def test_a_torn_sample_file_keeps_what_was_written(tmp_path):
    out = tmp_path / "torn.jsonl.gz"
    harness.append_sample(out, {"task_id": "A", "candidates": []})
    harness.append_sample(out, {"task_id": "B", "candidates": []})
    data = out.read_bytes()
    out.write_bytes(data[:-7])  # an interrupted append
    assert "A" in harness.read_samples(out)


def test_exec_cache_round_trips(tmp_path):
    from benchmarks.sandbox import ExecResult

    path = tmp_path / "exec.jsonl"
    results = {
        "abc": ExecResult(PASSED, "", 0.1, network_isolated=True),
        "def": ExecResult(TIMEOUT, "timed out", 2.0, network_isolated=False),
        "ghi": ExecResult(FAILED, "AssertionError", 0.2, network_isolated=True),
    }
    for key, result in results.items():
        harness._append_exec_cache(path, key, result)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"key": "torn", "sta')  # an interrupted append is skipped
    assert harness._read_exec_cache(path) == results  # every entry, not only the last


def test_harness_applies_the_static_policy_to_candidates_cut_off(tmp_path, capsys):
    """--static runs static_eval on the samples (a finish reason in CUT_REASONS counts as cut off): an unfinished
    candidate the others agree with most still ranks below a whole one."""
    problems = _problems()
    good0 = problems[0]["canonical_solution"]
    cut = dict(_cand(good0.rstrip()[:-12]), finish_reason="budget")
    record = {
        "task_id": problems[0]["task_id"],
        "prompt": problems[0]["prompt"],
        "candidates": [cut, cut, cut, _cand(good0)],
        "greedy": None,
    }
    samples = tmp_path / "samples.jsonl.gz"
    with gzip.open(samples, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
    summary = harness.main(
        [
            "--samples",
            str(samples),
            "--end",
            "1",
            "--timeout",
            "2",
            "--bootstrap",
            "50",
            "--static",
            "--rankers",
            "gsc/ngram_overlap/1-1/bin",
        ]
    )
    capsys.readouterr()
    assert summary["static_policy"] is True and summary["random_pick"]["mean"] == 0.25
    assert summary["rankers"]["gsc/ngram_overlap/1-1/bin"]["mean"] == 1.0


def test_bench_prefill_reads_prompts_of_the_asked_lengths(capsys):
    from benchmarks import bench_prefill

    summary = bench_prefill.main(["--model", "tiny:0", "--lengths", "300,700", "--repeats", "1"])
    rows = summary["results"]
    assert [(r["method"], r["length"], r["prompt_tokens"]) for r in rows] == [("ours", 300, 300), ("ours", 700, 700)]
    assert all(r["seconds"] > 0 and r["tokens_per_s"] > 0 for r in rows)
    assert summary["llama"].startswith("not run")  # no --llama-server: only ours, and it says so
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == summary


def test_bench_e2e_times_every_method_and_says_why_a_peer_did_not_run(capsys):
    from benchmarks import bench_e2e

    summary = bench_e2e.main(
        [
            "--model",
            "tiny:0",
            "--draft",
            "tiny:1",
            "--k",
            "2",
            "--temperature",
            "0.8",
            "--prompts",
            "1",
            "--max-new-tokens",
            "6",
            "--methods",
            "ours_none,ours_auto,llama,llama+chat",
        ]
    )
    methods = summary["results"][0]["methods"]
    assert methods["ours_none"]["prompts"] == methods["ours_auto"]["prompts"] == 3  # 1 HumanEval, a method, mid-line
    assert methods["ours_none"]["speedup_vs_ours_none"] == 1.0
    assert methods["ours_auto"]["tokens"] > 0 and methods["ours_auto"]["mean_s_per_prompt"] > 0
    for peer in ("llama", "llama+chat"):  # no --llama-server: not timed, and the note says so
        assert methods[peer]["prompts"] == 0 and methods[peer]["note"].startswith("not run")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == summary
