"""A candidate's own checks read from its code (checks/stated.py), and the candidate without its test code."""

import ast

from checks.check import TRUTHY, VALUE
from checks.stated import STATED, function_only, split_usage, stated_checks

ANSWER_WITH_USAGE = """import re


def is_valid(s):
    parts = s.split(".")
    return len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts)
    # four numbers below 256

# Example usage:
print(is_valid("256.0.0.1"))  # Output: False
assert is_valid('1.2.3.4')
"""
ANSWER = """import re

PATTERN = re.compile(r"^\\d+$")


def is_number(s):
    return bool(PATTERN.match(s))


def check_palindrome(s):
    return s == s[::-1]


# Example usage
print(is_number("12"))  # Output: True
print(is_number("1a"))  # -> False
print(is_number("7"))
assert check_palindrome("aba")
assert 5 == len("12345")


def test_numbers():
    assert is_number("") == False


if __name__ == "__main__":
    print(is_number("x"))  # False
    test_numbers()
"""


def test_asserts_commented_prints_and_test_functions_are_read():
    found = stated_checks(ANSWER)
    assert [(c.expression, c.expected, c.compare) for c in found] == [
        ("is_number('12')", "True", VALUE),
        ("is_number('1a')", "False", VALUE),
        ("check_palindrome('aba')", "", TRUTHY),  # an answer named check_... with a parameter is the candidate's
        ("is_number('')", "False", VALUE),
        ("is_number('x')", "False", VALUE),
    ]
    assert all(c.origin == STATED for c in found)
    assert found[0].line == 15


def test_what_is_not_a_stated_check_is_left_out():
    # a print without a stated value, an assert on builtins only, a call of an undefined name, a foreign value
    code = 'def f(x):\n    return x\n\nprint(f(1))\nassert len("a") == 1\nassert g(1) == 2\nprint(f(2))  # see above\n'
    assert stated_checks(code) == []
    assert stated_checks("def f(:\n") == []  # does not parse: nothing read


def test_function_only_keeps_the_answer_and_drops_its_test_code():
    kept = function_only(ANSWER)
    tree = ast.parse(kept)
    names = [getattr(n, "name", None) for n in tree.body]
    assert names == [None, None, "is_number", "check_palindrome"]  # import, PATTERN, the two answers
    assert "print(" not in kept and "assert" not in kept and "__main__" not in kept
    assert function_only("def f(:\n") == "def f(:\n"
    plain = "def f(x):\n    return x\n"
    assert function_only(plain) == plain


def test_split_usage_sets_the_example_usage_apart_from_the_code():
    code, usage = split_usage(ANSWER_WITH_USAGE)
    assert code == ANSWER_WITH_USAGE.split("\n\n# Example usage")[0] + "\n"  # the indented comment stays with the body
    assert usage.startswith("# Example usage:\nprint(is_valid(")
    assert "assert is_valid('1.2.3.4')" in usage
    compile(code, "code", "exec")  # the part to copy still runs on its own


def test_split_usage_leaves_programs_interleaved_code_and_broken_code_whole():
    program = "import sys\n\nn = int(sys.stdin.readline())\nprint(n * n)\n"
    interleaved = "def f():\n    return 1\n\nprint(f())\n\ndef g():\n    return 2\n"
    entry_point = "def main():\n    print(42)\n\nif __name__ == '__main__':\n    main()\n"
    no_call = "def f():\n    return 1\n\nprint('done')\n"
    reads = "import sys\n\ndef sq(n):\n    return n * n\n\nn = int(sys.stdin.readline())\nprint(sq(n))\n"
    asks = "def add(a, b):\n    return a + b\n\na = int(input())\nprint(add(a, 1))\n"
    for whole in (program, interleaved, entry_point, no_call, reads, asks, "def f(:\n", ""):
        assert split_usage(whole) == (whole, "")


JS_ANSWER = """function add(a, b) {
  return a + b;
}

const assert = require("assert");
console.log(add(2, 3)); // Output: 5
console.log(add(-1, 1)); // => 0
console.log(add(7, 7)); // the sum
assert.strictEqual(add(1, 1), 2);
console.assert(add(2, 2) === 4, "two and two");
const wide = add(
  5, 6);
module.exports = { add };
"""


def test_a_javascript_candidate_states_its_asserts_and_its_commented_logs():
    found = stated_checks(JS_ANSWER, "javascript")
    assert [(c.line, c.expression, c.expected) for c in found] == [
        (6, "add(2, 3)", "5"),
        (7, "add(-1, 1)", "0"),
        (9, "add(1, 1)", "2"),
        (10, "add(2, 2)", "4"),
    ]  # line 8's comment states no value
    assert {c.origin for c in found} == {STATED} and {c.language for c in found} == {"javascript"}
    kept = function_only(JS_ANSWER, "javascript")
    assert (
        kept
        == 'function add(a, b) {\n  return a + b;\n}\n\nconst assert = require("assert");\nmodule.exports = { add };\n'
    )


def test_only_plain_calls_of_its_own_functions_are_read_and_compiled_languages_not_at_all():
    code = (
        "function fact(n) {\n  console.assert(valid(n));\n  return n <= 1 ? 1 : n * fact(n - 1);\n}\n"
        "function checkPrime(n) {\n  return n > 1;\n}\n"
        "const xs = [1, 2];\nconsole.assert(fact(xs.length) === 2);\nconsole.assert(fact(3) === 6);\n"
        "console.assert(checkPrime(7));\n"
    )
    found = stated_checks(code, "javascript")
    assert [(c.expression, c.expected, c.compare) for c in found] == [
        ("fact(3)", "6", VALUE),
        ("checkPrime(7)", "", TRUTHY),
    ]
    rust = "fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\nfn main() {\n    assert_eq!(add(2, 3), 5);\n}\n"
    assert stated_checks(rust, "rust") == [] and function_only(rust, "rust") == rust  # one build for all: not read


def test_a_script_keeps_what_it_defines_whatever_its_shape():
    code = (
        "const fact = (n) =>\n  n <= 1 ? 1 : n * fact(n - 1);\n"
        "const inner = (s) => s.match(/\\(([^)]+)\\)/);\n"
        "class Solver {\n  run() {\n    return fact(3);\n  }\n}\n"
        "const total =\n  fact(4);\n"
        "console.log(fact(3)); // 6\n"
        "main();\n"
    )
    kept = function_only(code, "javascript")
    assert kept == code.split("const total")[0]  # the definitions whole, every top-level call gone
    assert split_usage(code, "javascript") == (kept, "const total =\n  fact(4);\nconsole.log(fact(3)); // 6\nmain();\n")
    assert function_only("function f( {\n", "javascript") == "function f( {\n"  # does not parse: as it is


def test_a_script_shows_its_example_usage_apart_where_it_follows_the_code():
    script = "function add(a, b) {\n  return a + b;\n}\n\n// Example usage:\nconsole.log(add(2, 3)); // 5\n"
    assert split_usage(script, "javascript") == (
        "function add(a, b) {\n  return a + b;\n}\n",
        "// Example usage:\nconsole.log(add(2, 3)); // 5\n",
    )
    assert split_usage(JS_ANSWER, "javascript") == (JS_ANSWER, "")  # module.exports after the tests: left whole
    rust = 'fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\nfn main() {\n    println!("{}", add(1, 2));\n}\n'
    assert split_usage(rust, "rust") == (rust, "")  # a compiled program's main is the program


def test_the_code_keeps_a_global_its_functions_read():
    code = "def sieve(n):\n    return [2, 3]\n\ndef is_prime(n):\n    return n in PRIMES\n\nPRIMES = set(sieve(100))\n"
    usage = "print(is_prime(3))  # True\n"
    assert split_usage(code + usage) == (code, usage)
    assert function_only(code + usage).endswith("PRIMES = set(sieve(100))\n")
