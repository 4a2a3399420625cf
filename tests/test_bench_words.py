"""benchmarks/bench_words.py without models or servers: the copied MBPP file, a task asked in words, the code taken
from an answer, and right and wrong candidates judged by all of a task's asserts in the real sandbox."""

import gzip
import hashlib

from benchmarks import bench_words as bench
from benchmarks.sandbox import SandboxSettings

FAST = SandboxSettings(timeout_s=5.0, memory_mb=512)
JSONL_SHA256 = "502db01bcc1e911d691d5212bd3d9c60ee52bbc2bd29457a520ace424bb2709d"  # benchmarks/data/MBPP.md
SQUARES = bench.Task(
    8,
    "Write a function to find squares of individual elements in a list.",
    ("assert square_nums([1, 2, 3])==[1, 4, 9]", "assert square_nums([10,20,30])==([100,400,900])"),
    ("import math",),
    "def square_nums(nums):\n return [x ** 2 for x in nums]",
)


def test_the_copied_file_is_mbpp_sanitized_whole():
    assert hashlib.sha256(gzip.decompress(bench.DATA.read_bytes())).hexdigest() == JSONL_SHA256
    tasks = bench.read_tasks()
    assert len(tasks) == 427 and len({t.task_id for t in tasks}) == 427
    assert all(t.prompt and t.reference and len(t.tests) >= 3 for t in tasks)
    assert sum(bool(t.imports) for t in tasks) == 13


def test_a_task_is_asked_in_words_with_its_first_assert_only():
    text = bench.request_text(SQUARES)
    assert text == (
        "Write a function to find squares of individual elements in a list.\n"
        "Your code should pass this test:\n"
        "assert square_nums([1, 2, 3])==[1, 4, 9]"
    )
    assert SQUARES.tests[1] not in text
    drawn = bench.draw(bench.read_tasks(), 5, 0)
    assert drawn == bench.draw(bench.read_tasks(), 5, 0) != bench.draw(bench.read_tasks(), 5, 1)
    assert [t.task_id for t in drawn] == sorted(t.task_id for t in drawn) and len(drawn) == 5


def test_the_code_of_an_answer_is_its_first_fenced_block_or_the_whole_text():
    answer = "Here it is:\n```python\ndef f():\n    return 1\n```\nand a test:\n```python\nprint(f())\n```\n"
    assert bench.answer_code(answer) == "def f():\n    return 1\n"
    assert bench.answer_code("def f():\n    return 1\n") == "def f():\n    return 1\n"
    ours = {"choices": [{"ranked_drafts": {"code": "a = 1\n"}}, {"ranked_drafts": {"code": "a = 2\n"}}]}
    llama = {"choices": [{"message": {"role": "assistant", "content": "Sure.\n```python\nb = 1\n```"}}]}
    assert bench.reply_codes(ours, "ours") == ["a = 1\n", "a = 2\n"]
    assert bench.reply_codes(llama, "llama") == ["b = 1\n"]


def test_the_request_bodies_are_openai_chat_bodies():
    args = bench.parse_args(["--k", "4"])
    ranked = bench.chat_body(SQUARES, "ours_ranked", args)
    assert ranked["messages"] == [{"role": "user", "content": bench.request_text(SQUARES)}]
    assert (ranked["n"], ranked["temperature"], ranked["max_tokens"], ranked["budget_s"]) == (4, 0.8, 512, 60.0)
    greedy = bench.chat_body(SQUARES, "llama_greedy", args)
    assert (greedy["n"], greedy["temperature"], "budget_s" in greedy) == (1, 0.0, False)
    assert ranked["seed"] == greedy["seed"] == 8


def test_right_and_wrong_candidates_are_judged_by_every_assert_in_the_sandbox():
    program = bench.hidden_program(SQUARES, "def square_nums(nums):\n    return [x * x for x in nums]\n")
    assert program.index("import math") > program.index("return") and program.endswith("[100,400,900])\n")
    right = "def square_nums(nums):\n    return [x * x for x in nums]\n"
    first_only = "def square_nums(nums):\n    return [1, 4, 9]\n"  # passes the assert it was shown, not the rest
    answers = {8: bench.Answer([right, first_only, "", "def square_nums(:\n"], 1.0)}
    verdicts = bench.judge([SQUARES], answers, FAST)
    assert verdicts == {8: [True, False, False, False]}
    row = bench.summarize("ours_ranked", answers, verdicts)
    assert (row["pass@first"], row["pass@all"], row["n_tasks"]) == (100.0, 100.0, 1)


def test_without_its_example_a_task_is_its_sentence_and_the_signature_its_tests_call():
    text = bench.request_text(SQUARES, "none")
    assert text == (
        "Write a function to find squares of individual elements in a list.\nThe function is `def square_nums(nums)`."
    )
    assert "assert" not in text and "[1, 4, 9]" not in text
    assert all(bench.signature(task).startswith("def ") for task in bench.read_tasks())  # every task has one
    assert bench.parse_args(["--examples", "none"]).examples == "none"


def test_words_evidence_reorders_the_same_samples_without_the_stated_tier():
    from benchmarks import words_evidence as evidence

    def choice(rank, code, passed, score, stated, usage=None):
        parts = {"stated_agreement": stated, "consistency": score, "mean_logprob": -0.1}
        ranked = {"rank": rank, "score": score, "score_parts": parts, "parses": True, "findings": []}
        return {"code": code, "passed": passed, "ranked_drafts": ranked | {"example_usage": usage}}

    right = "def f(x):\n    return x + 1\n"
    wrong = "def f(x):\n    return x\n"
    line = {
        "passed": True,
        "candidates": [
            choice(1, right, True, 0.4, 2.0, "assert f(1) == 2\n"),
            choice(2, wrong, False, 0.9, 0.0),
            choice(2, wrong, False, 0.9, 0.0),
        ],
    }
    assert (
        evidence.without(line, "stated_agreement") is False
    )  # agreement alone puts the two copies of the wrong one first
    assert evidence.stating(line) == (1, 2)  # of two distinct answers, one states a check (in its example usage)
    line["candidates"][0]["ranked_drafts"]["score"] = 1.0
    assert evidence.without(line, "stated_agreement") is True


def test_words_evidence_reorders_the_same_samples_without_the_model_tests_tier():
    from benchmarks import words_evidence as evidence

    def choice(rank, passed, score, agreement):
        parts = {"agreement": agreement, "stated_agreement": 0.0, "mean_logprob": -0.1}
        ranked = {"rank": rank, "score": score, "score_parts": parts, "parses": True, "findings": []}
        return {"code": f"def f():\n    return {rank}\n", "passed": passed, "ranked_drafts": ranked}

    line = {"passed": True, "candidates": [choice(1, True, 0.2, 3.0), choice(2, False, 0.9, 1.0)]}
    assert evidence.without(line, "stated_agreement") is True  # the model's tests' agreement puts the right one first
    assert evidence.without(line, "agreement") is False  # without them the higher score wins


def test_eval_majority_replays_the_rows_that_ended_first_ranked_on_their_own_stated_checks(checker):
    """Rows end in order of their length: the short wrong one alone is first; with the right one, its stated check
    ranks it first; the long wrong row's own checks, read only once every row has ended, outvote it."""
    from benchmarks import eval_majority

    def row(code, passed, score, usage=""):
        return {"code": code, "passed": passed, "ranked_drafts": {"score": score, "example_usage": usage}}

    right = "def f(x):\n    return x + 1\n"
    wrong = "def f(x):\n    return x\n"
    long_wrong = "def f(x):\n    # " + "a long comment " * 20 + "\n    return x\n"
    line = {
        "task_id": 1,
        "passed": False,
        "candidates": [
            row(right, True, 0.1, "print(f(1))  # Output: 2\n"),
            row(wrong, False, 0.9),
            row(long_wrong, False, 0.8, "print(f(1))  # Output: 1\nprint(f(2))  # Output: 2\n"),
        ],
    }
    replayed = eval_majority.replay(line, len, checker)
    assert replayed["passes"] == [False, True, False]
    assert replayed["shares"][-1] == 1.0 and replayed["shares"][0] < replayed["shares"][1] < 1.0
    line["candidates"][1]["ranked_drafts"]["finish_reason"] = "length"  # cut by its limit: it never ends by itself
    assert eval_majority.replay(line, len, checker)["passes"] == [True, False, False]
