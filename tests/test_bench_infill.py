"""benchmarks/bench_infill.py on the official HumanEval-Infilling sets: the copied files, the tasks built from them,
the seeded draw, the middle's cut, and the sandboxed judge on true and wrong middles (no model, no server)."""

import json

import pytest

from benchmarks import bench_infill as bench
from benchmarks.sandbox import SandboxSettings

FAST = SandboxSettings(timeout_s=5.0, memory_mb=512)
SIZES = {"he-single": 1033, "he-multi": 5815, "he-span-light": 164, "he-span": 1640}
FIELDS = {"task_id", "prompt", "suffix", "canonical_solution", "test", "entry_point"}


@pytest.fixture(scope="module")
def official():
    """kind -> (every task, the problems' tests), all 164 problems."""
    return {kind: bench.official_tasks(bench.read_official(kind), slice(0, 164)) for kind in bench.OFFICIAL}


def test_each_official_set_is_read_whole(official):
    for kind, (tasks, problems) in official.items():
        rows = bench.read_official(kind)
        assert len(rows) == len(tasks) == SIZES[kind] and all(set(row) == FIELDS for row in rows)
        assert len(problems) == 164 and {t.problem for t in tasks} == set(problems)
        assert all(set(p) == {"test", "entry_point"} for p in problems.values())
    single, _ = official["he-single"]
    assert all(t.middle.endswith("\n") and t.middle.count("\n") == 1 for t in single)
    assert official["he-multi"][0][0].task_id == "MultiLineInfilling/HumanEval/0/L0_L0"


def test_problems_and_the_seeded_draw_pick_subsets(official):
    tasks, problems = bench.official_tasks(bench.read_official("he-multi"), slice(3, 5))
    assert set(problems) == {"HumanEval/3", "HumanEval/4"} and {t.problem for t in tasks} == set(problems)
    every = official["he-multi"][0]
    drawn = bench.draw(every, 50, 0, "he-multi")
    assert len(drawn) == 50 and drawn == bench.draw(every, 50, 0, "he-multi") != bench.draw(every, 50, 1, "he-multi")
    order = {t.task_id: i for i, t in enumerate(every)}
    assert [order[t.task_id] for t in drawn] == sorted(order[t.task_id] for t in drawn)  # file order kept
    assert bench.draw(every, 0, 0, "he-multi") == every == bench.draw(every, 10**6, 0, "he-multi")


def test_the_cut_leaves_every_canonical_middle_whole_and_drops_an_overrun(official):
    for kind, (tasks, _) in official.items():
        assert all(bench.clean_middle(t.middle, kind, t.suffix, True) == t.middle for t in tasks), kind
    for task in official["he-multi"][0][:300]:  # the middle, then the suffix again, then a test
        overrun = task.middle + task.suffix + "\n\ndef test():\n    pass\n"
        assert bench.clean_middle(overrun, "he-multi", task.suffix, True).rstrip("\n") == task.middle.rstrip("\n")
    assert bench.clean_middle("    return x", "he-single", "", True) == "    return x\n"
    assert bench.clean_middle("    return x\n    y\n", "he-single", "", True) == "    return x\n"


def test_official_program_is_the_harness_s(official):
    task = official["he-span-light"][0][0]
    problem = official["he-span-light"][1][task.problem]
    program = bench.official_program(task.prefix, task.middle, task.suffix, problem["test"], problem["entry_point"])
    assert program == task.prefix + task.middle + task.suffix + "\n" + problem["test"] + "\ncheck(has_close_elements)"


def test_true_middles_pass_and_wrong_ones_fail_in_the_sandbox(official):
    chosen, middles, wrong = [], {}, set()
    for kind, (tasks, _) in official.items():
        for task in bench.draw(tasks, 2, 0, kind):
            chosen.append((kind, task))
            middles[task.task_id] = [task.middle, "    return None\n" if kind == "he-single" else ""]
            wrong.add(task.task_id)
    # a wrong line with the right one's indentation: HumanEval/0's last line answers the opposite
    single = next(t for t in official["he-single"][0] if t.middle == "    return False\n")
    chosen.append(("he-single", single))
    middles[single.task_id] = ["    return False\n", "    return True\n"]
    for kind in bench.OFFICIAL:
        tasks = [t for k, t in chosen if k == kind]
        verdicts = bench.judge(tasks, middles, official[kind][1], kind, FAST)
        assert all(verdicts[t.task_id] == [True, False] for t in tasks), (kind, verdicts)


def test_the_oracle_needs_no_server(capsys):
    summary = bench.main(["--kind", "he-span-light", "--tasks", "3", "--seed", "7", "--servers", "none", "--oracle"])
    assert summary["results"]["oracle"]["greedy_pass@1"] == {"passed": 3, "n": 3, "rate": 1.0}
    assert summary["model"] is None and summary["servers"] == {} and summary["log_dir"] is None
    assert (summary["kind"], summary["seed"], summary["n_pool"], summary["n_tasks"]) == ("he-span-light", 7, 164, 3)
    assert summary["source"].endswith("HumanEval-RandomSpanInfillingLight.jsonl.gz")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == summary
