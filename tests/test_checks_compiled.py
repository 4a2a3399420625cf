"""C++, Rust and Java checks built and run in the real sandbox (each where its tools are on PATH): a right candidate
passes, a wrong one fails with what came back, a loop is a timeout, a crash is that check's error, a compile error
is an error of every check of that candidate."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest

from checks import CheckRunner, checks_for_prompt, parse_user_checks

# One MultiPL-E-style prompt per language (the examples in the language's own syntax), and bodies for it: right,
# wrong, looping on the first example and crashing on the second, not compiling.
CASES = {
    "cpp": (
        '#include <string>\n#include <vector>\n// Return the length of a string.\n// >>> length((""))\n// (0)\n'
        '// >>> length(("abc"))\n// (3)\nlong length(std::string string) {\n',
        {
            "right": "    return string.size();\n}\n",
            "wrong": "    return string.size() + 1;\n}\n",
            "loop, crash": "    if (!string.empty()) { int* p = nullptr; return *p; }\n    while (true) {}\n}\n",
            "broken": "    return string.size() +;\n}\n",
        },
        ("error", "the check crashed: Segmentation fault"),
        "candidate.cpp:9:",
    ),
    "rust": (
        '/// Return the length of a string.\n/// >>> strlen(String::from(""))\n/// 0\n'
        '/// >>> strlen(String::from("abc"))\n/// 3\nfn strlen(string: String) -> isize {\n',
        {
            "right": "    string.len() as isize\n}\n",
            "wrong": "    string.len() as isize + 1\n}\n",
            "loop, crash": '    if !string.is_empty() { panic!("not empty") }\n    loop {}\n}\n',
            "broken": "    string.len() as isize +\n}\n",
        },
        ("error", "panicked: not empty"),
        "candidate.rs:8:",
    ),
    "java": (
        "import java.util.*;\nclass Problem {\n    // Return the length of a string.\n"
        '    // >>> strlen((""))\n    // (0l)\n    // >>> strlen(("abc"))\n    // (3l)\n'
        "    public static long strlen(String string) {\n",
        {
            "right": "        return string.length();\n    }\n",
            "wrong": "        return string.length() + 1;\n    }\n",
            "loop, crash": "        if (!string.isEmpty()) return (new int[0])[1];\n        while (true) {}\n    }\n",
            "broken": "        return string.length() +;\n    }\n",
        },
        ("error", "java.lang.ArrayIndexOutOfBoundsException: Index 1 out of bounds for length 0"),
        "src/Candidate.java:9:",
    ),
}
TOOLS = {"cpp": "g++", "rust": "rustc", "java": "javac"}


@pytest.fixture(scope="module")
def runner():
    made = CheckRunner.create()
    assert made.available, made.reason
    return made


def _ready(runner: CheckRunner, language: str) -> None:
    if shutil.which(TOOLS[language]) is None:
        pytest.skip(f"{TOOLS[language]} is not on PATH here")
    assert runner.reason_for(language) is None


def _statuses(result):
    return [(o.status, o.got) for o in result.outcomes]


@pytest.mark.parametrize("language", sorted(CASES))
def test_candidates_pass_fail_loop_crash_or_do_not_compile(runner, language):
    _ready(runner, language)
    prompt, bodies, crashed, compile_error_at = CASES[language]
    checks = checks_for_prompt(prompt, language)
    assert len(checks) == 2
    results = dict(zip(bodies, runner.run([prompt + body for body in bodies.values()], checks, language)))
    assert _statuses(results["right"]) == [("passed", "0"), ("passed", "3")]
    assert _statuses(results["wrong"]) == [("failed", "1"), ("failed", "4")]
    assert _statuses(results["loop, crash"]) == [("timeout", "no answer within 0.5 s"), crashed]
    broken = results["broken"]
    assert broken.passed == 0 and broken.load_error.startswith(f"compile error: {compile_error_at}")
    assert all(o.status == "error" and "compile error" in o.got for o in broken.outcomes)


USER_ASSERTS = {
    "cpp": (
        "#include <vector>\nstd::vector<long> twice(std::vector<long> v) {\n"
        "    for (auto& x : v) x *= 2;\n    return v;\n}\ndouble half(long n) { return n / 2.0; }\n"
        "int main() { return 1; }\n",  # the candidate's own main is renamed, not run
        "assert(twice({1, 2}) == std::vector<long>({2, 4}));\nassert(half(1) == 0.5000001);\n"
        "assert(twice({1}).size() == 2);\nassert(twice({}).empty());\n",
        [("passed", "{2, 4}"), ("passed", "0.5"), ("failed", "1"), ("passed", "true")],
    ),
    "rust": (
        "fn twice(v: Vec<i64>) -> Vec<i64> {\n    v.iter().map(|x| x * 2).collect()\n}\n"
        'fn name(n: i64) -> Option<String> {\n    if n > 0 { Some(format!("n{}", n)) } else { None }\n}\n'
        'fn main() {\n    panic!("not run");\n}\n',
        'assert_eq!(twice(vec![1, 2]), vec![2, 4]);\nassert_eq!(name(1), Some(String::from("n1")));\n'
        "assert!(name(0).is_some());\nassert_eq!(twice(vec![]).len(), 1);\n",
        [("passed", "[2, 4]"), ("passed", 'Some("n1")'), ("failed", "false"), ("failed", "0")],
    ),
    "java": (
        "import java.util.*;\nimport org.javatuples.*;\nclass Problem {\n"
        "    static ArrayList<Long> twice(ArrayList<Long> v) {\n        ArrayList<Long> out = new ArrayList<>();\n"
        "        for (long x : v) out.add(x * 2);\n        return out;\n    }\n"
        '    static Pair<Long, String> pair(long n) { return Pair.with(n, "n" + n); }\n'
        "    static float third(long n) { return n / 3.0f; }\n}\n",
        "assert twice(new ArrayList<Long>(Arrays.asList(1l, 2l))).equals(new ArrayList<Long>(Arrays.asList(2l, 4l)));\n"
        'assert pair(1).equals(Pair.with(1l, "n1"));\nassert third(1) == 0.3333333;\n'
        'assert twice(new ArrayList<Long>()).size() == 1 : "one";\n',
        [("passed", "[2, 4]"), ("passed", "[1, n1]"), ("passed", "0.33333334"), ("failed", "0")],
    ),
}


@pytest.mark.parametrize("language", sorted(USER_ASSERTS))
def test_the_users_own_asserts_run(runner, language):
    _ready(runner, language)
    program, asserts, expected = USER_ASSERTS[language]
    (result,) = runner.run([program], parse_user_checks(asserts, language), language)
    assert result.load_error is None and _statuses(result) == expected


def test_a_built_candidate_reaches_no_host_file_and_no_network(runner, tmp_path):
    """At run time (reading, writing, connecting) and at build time (`#include` of a host file) alike."""
    _ready(runner, "cpp")
    secret = tmp_path / "id_ed25519"
    secret.write_text("SECRET-KEY")
    os.chmod(tmp_path, 0o777)
    os.chmod(secret, 0o666)  # readable and writable by anyone: only the sandbox stands between them
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    path, port = json.dumps(str(secret)), listener.getsockname()[1]
    program = (
        "#include <arpa/inet.h>\n#include <fstream>\n#include <string>\n#include <sys/socket.h>\n"
        f"std::string steal() {{ std::ifstream in({path}); std::string s; std::getline(in, s); return s; }}\n"
        f'bool spoil() {{ std::ofstream out({path}); out << "pwned"; return out.good(); }}\n'
        "bool call() {\n  int s = socket(AF_INET, SOCK_STREAM, 0);\n  sockaddr_in a{};\n  a.sin_family = AF_INET;\n"
        f'  a.sin_port = htons({port});\n  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);\n'
        "  return connect(s, (sockaddr*)&a, sizeof a) == 0;\n}\n"
    )
    checks = parse_user_checks('assert(steal() == "SECRET-KEY");\nassert(spoil());\nassert(call());\n', "cpp")
    at_run, at_build = runner.run([program, f"#include {path}\n" + program], checks, "cpp")
    assert _statuses(at_run) == [("failed", '""'), ("failed", "false"), ("failed", "false")]
    assert "No such file or directory" in at_build.load_error and at_build.passed == 0
    with pytest.raises(BlockingIOError):
        listener.accept()
    listener.close()
    assert secret.read_text() == "SECRET-KEY"
