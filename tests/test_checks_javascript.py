"""JavaScript checks run by the real node in the real sandbox: outcomes as data with what came back, deep equality,
limits, hostile candidates contained; where node is missing, nothing runs and the runner says why."""

from __future__ import annotations

import os
import shutil
import socket
import time

import pytest

from checks import CheckRunner, SandboxUnavailable, checks_for_prompt, parse_user_checks

PROMPT = (
    '//Return length of given string\n// >>> strlen("")\n// 0\n// >>> strlen("abc")\n// 3\nfunction strlen(string){\n'
)

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH here")


@pytest.fixture(scope="module")
def runner():
    made = CheckRunner.create()
    assert made.available, made.reason
    assert made.reason_for("javascript") is None
    return made


def _statuses(result):
    return [(o.status, o.got) for o in result.outcomes]


def test_a_right_candidate_passes_and_a_wrong_one_fails_with_what_came_back(runner):
    checks = checks_for_prompt(PROMPT, "javascript")
    right, wrong, raising, broken = runner.run(
        [
            PROMPT + "  return string.length;\n}\n",
            PROMPT + "  return string.length + 1;\n}\n",
            PROMPT + "  return string.size();\n}\n",
            PROMPT + "  return string.length +;\n}\n",
        ],
        checks,
        "javascript",
    )
    assert _statuses(right) == [("passed", "0"), ("passed", "3")] and right.passed == 2
    assert _statuses(wrong) == [("failed", "1"), ("failed", "4")] and wrong.passed == 0
    assert [s for s, _ in _statuses(raising)] == ["error", "error"]
    assert raising.outcomes[0].got == "TypeError: string.size is not a function (line 7)"
    assert broken.load_error == "SyntaxError: Unexpected token ';' (line 7)" and broken.passed == 0


def test_a_module_is_read_as_a_script_with_its_lines_kept(runner):
    prompt = 'import { basename } from "path";\n// >>> base("/a/b.js")\n// "b.js"\nexport function base(p) {\n'
    checks = checks_for_prompt(prompt, "javascript")
    right, raising = runner.run(
        [prompt + "  return basename(p);\n}\n", prompt + "  return basename(p).nope();\n}\n"], checks, "javascript"
    )
    assert _statuses(right) == [("passed", '"b.js"')]
    assert _statuses(raising) == [("error", "TypeError: basename(...).nope is not a function (line 5)")]


def test_a_loop_is_a_timeout_of_that_check_alone(runner):
    checks = checks_for_prompt(PROMPT, "javascript")
    (looping,) = runner.run([PROMPT + "  while (string === '') {}\n  return string.length;\n}\n"], checks, "javascript")
    assert _statuses(looping) == [("timeout", "no answer within 0.5 s"), ("passed", "3")]


def test_values_compare_deeply_and_numbers_within_a_tolerance(runner):
    program = (
        "function pair(n) { return [n, {a: [n]}]; }\nconst third = (n) => n / 3;\n"
        "function same(n) { return n; }\nasync function later(n) { return n * 2; }\n"
    )
    checks = parse_user_checks(
        "assert.deepStrictEqual(pair(1), [1, {a: [1]}])\nassert.deepStrictEqual(third(1), 0.3333333)\n"
        'assert.deepStrictEqual(same(1), "1")\nassert.deepStrictEqual(same(null), undefined)\n'
        "assert.deepStrictEqual(same(NaN), NaN)\nassert.deepStrictEqual(later(2), 4)\n",
        "javascript",
    )
    (result,) = runner.run([program], checks, "javascript")
    assert _statuses(result) == [
        ("passed", '[1, {"a": [1]}]'),
        ("passed", "0.3333333333333333"),  # within 1e-6 of 0.3333333
        ("failed", "1"),  # the number 1 is not the string "1"
        ("failed", "null"),  # null is not undefined
        ("passed", "NaN"),
        ("passed", "4"),  # a promise is awaited
    ]


def test_the_users_own_asserts_run_in_javascript(runner):
    checks = parse_user_checks(
        'assert.deepStrictEqual(strlen("ab"), 2);\nassert(strlen("") === 0)\nconsole.assert(strlen("x") > 5)\n',
        "javascript",
    )
    (result,) = runner.run([PROMPT + "  return string.length;\n}\n"], checks, "javascript")
    assert _statuses(result) == [("passed", "2"), ("passed", "0"), ("failed", "false")]


def test_printing_exiting_and_allocating_are_the_candidates_own_failures(runner):
    prompt = "// >>> f(1)\n// 1\n// >>> f(2)\n// 2\n// >>> f(3)\n// 3\nfunction f(n) {\n"
    body = (
        "  if (n === 1) { for (let i = 0; i < 2000; i++) console.log('x'.repeat(10000)); return 1; }\n"
        "  if (n === 2) process.exit(7);\n"
        "  const hog = []; while (true) hog.push(new Array(1e6).fill(n));\n}\n"
    )
    started = time.monotonic()
    (result,) = runner.run([prompt + body], checks_for_prompt(prompt, "javascript"), "javascript")
    assert _statuses(result)[:2] == [("passed", "1"), ("error", "Error: process.exit(7) was called (line 9)")]
    assert result.outcomes[2].status in ("error", "timeout")  # the heap limit, or the check's time, stops it
    assert time.monotonic() - started < 6


def test_a_candidate_reaches_no_network_and_no_host_file(runner, tmp_path):
    secret = tmp_path / "id_ed25519"
    secret.write_text("SECRET-KEY")
    os.chmod(tmp_path, 0o777)
    os.chmod(secret, 0o666)  # readable and writable by anyone: only the sandbox stands between them
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    program = (
        f"function steal() {{\n  return require('fs').readFileSync({str(secret)!r}, 'utf8');\n}}\n"
        f"function spoil() {{\n  require('fs').writeFileSync({str(secret)!r}, 'pwned');\n"
        f"  require('fs').writeFileSync({str(tmp_path / 'outside.txt')!r}, 'pwned');\n  return 'done';\n}}\n"
        "function call() {\n  return new Promise((resolve, reject) => {\n"
        f"    const s = require('net').connect({port}, '127.0.0.1', () => resolve('connected'));\n"
        "    s.on('error', (err) => reject(err));\n  });\n}\n"
    )
    checks = parse_user_checks(
        "assert(steal() === 'SECRET-KEY')\nassert(spoil() === 'done')\nassert(call() === 'connected')", "js"
    )
    (result,) = runner.run([program], checks, "javascript")
    assert [o.status for o in result.outcomes] == ["error", "error", "error"], _statuses(result)
    assert "ENOENT" in result.outcomes[0].got and "ECONNREFUSED" in result.outcomes[2].got
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    assert secret.read_text() == "SECRET-KEY" and not (tmp_path / "outside.txt").exists()


def test_eight_candidates_take_about_a_second(runner):
    checks = checks_for_prompt(PROMPT, "javascript")
    programs = [PROMPT + f"  return string.length + {i} - {i};\n}}\n" for i in range(8)]
    started = time.monotonic()
    results = runner.run(programs, checks, "javascript")
    elapsed = time.monotonic() - started
    print(f"8 JavaScript candidates, 2 checks each: {elapsed:.2f} s")
    assert [r.passed for r in results] == [2] * 8
    assert elapsed < 4.0


def test_checks_of_another_language_are_refused(runner):
    with pytest.raises(ValueError, match="checks written in python cannot run on programs in javascript"):
        runner.run([PROMPT + "  return 0;\n}\n"], parse_user_checks("assert strlen('') == 0"), "javascript")


def test_without_node_nothing_runs_and_the_runner_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without node: nothing of it on PATH
    runner = CheckRunner.create()
    assert runner.available and runner.reason_for("python") is None
    assert runner.reason_for("javascript") == "checks in JavaScript are not run: node is not on PATH here"
    with pytest.raises(SandboxUnavailable, match="node is not on PATH here"):
        runner.run([PROMPT + "  return 0;\n}\n"], checks_for_prompt(PROMPT, "javascript"), "js")
    assert "no check program for Go" in runner.reason_for("go")
