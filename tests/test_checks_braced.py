"""Checks read from code in other languages than Python: MultiPL-E's examples in comments, inline forms, the
function at the cursor, and the user's own assert lines in each language."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from checks import checks_for_infill, checks_for_prompt, parse_user_checks
from checks.check import TRUTHY, VALUE

SAMPLE = Path(__file__).parent.parent / "benchmarks/data/multipl_e_humaneval_sample.jsonl"


def _pairs(prompt: str, language: str) -> list[tuple[str, str]]:
    return [(c.expression, c.expected) for c in checks_for_prompt(prompt, language)]


def test_multipl_e_javascript_examples():
    prompt = (
        '//Return length of given string\n// >>> strlen("")\n// 0\n// >>> strlen("abc")\n// 3\n'
        "function strlen(string){\n"
    )
    found = checks_for_prompt(prompt, "javascript")
    assert [(c.line, c.expression, c.expected, c.compare, c.origin, c.language) for c in found] == [
        (2, 'strlen("")', "0", VALUE, "doctest", "javascript"),
        (4, 'strlen("abc")', "3", VALUE, "doctest", "javascript"),
    ]


@pytest.mark.parametrize(
    "language, prompt, expected",
    [
        (
            "cpp",
            '#include<bits/stdc++.h>\n// >>> strlen(("abc"))\n// (3)\nlong strlen(std::string string) {\n',
            [('strlen(("abc"))', "(3)")],
        ),
        (
            "java",
            'class Problem {\n    // >>> strlen(("abc"))\n    // (3l)\n'
            "    public static long strlen(String string) {\n",
            [('strlen(("abc"))', "(3l)")],
        ),
        (
            "rust",
            '/// >>> strlen(String::from("abc"))\n/// 3\nfn strlen(string: String) -> isize {\n',
            [('strlen(String::from("abc"))', "3")],
        ),
        (
            "cpp",
            "// >>> f((std::vector<long>({(long)1, (long)2})))\n// (std::vector<long>({(long)2,\n// (long)1}))\n"
            "std::vector<long> f(std::vector<long> v) {\n",
            [("f((std::vector<long>({(long)1, (long)2})))", "(std::vector<long>({(long)2, (long)1}))")],
        ),
        (
            "typescript",
            "/**\n * Doubles.\n * >>> twice(2)\n * 4\n */\nfunction twice(n: number): number {\n",
            [("twice(2)", "4")],
        ),
    ],
)
def test_multipl_e_examples_in_each_language(language, prompt, expected):
    assert _pairs(prompt, language) == expected


def test_the_multipl_e_sample_reads_every_example_that_calls_the_prompts_function():
    """All 20 sample prompts of eight languages: every `>>>` example is read, except the one that calls a function
    the prompt does not define (HumanEval 81's grade_equation), which is left out."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    for language in ("javascript", "typescript", "cpp", "java", "rust", "csharp", "go", "php"):
        read, written = 0, 0
        for row in (r for r in rows if r["language"] == language):
            found = checks_for_prompt(row["prompt"], language)
            written += len(re.findall(">>>", row["prompt"]))
            read += len(found)
            assert all(c.language == language and c.origin == "doctest" for c in found)
            assert "grade_equation" not in " ".join(c.expression for c in found)
        assert (read, written) == (56, 57), language


def test_prose_and_other_functions_are_left_out():
    prompt = (
        "// >>> other(2)\n// 4\n"  # not a function of this code
        "// >>> add(1, 2)\n// 3 because one and two make three\n"  # a sentence, not a value
        "// >>> add(2, 2)\n//\n"  # no value
        "function add(a, b) {\n"
    )
    assert _pairs(prompt, "javascript") == []


@pytest.mark.parametrize(
    "comment, expected",
    [
        ("add(2, 3) == 5", ("add(2, 3)", "5")),
        ("add(2, 3) === 5", ("add(2, 3)", "5")),
        ("add(2, 3) => 5", ("add(2, 3)", "5")),
        ("add(2, 3) ➞ 5", ("add(2, 3)", "5")),
        ("add(2, 3) // 5", ("add(2, 3)", "5")),
        ("for example, add(3, 4) returns 7.", ("add(3, 4)", "7")),
        ('add("a", "b") -> "ab"', ('add("a", "b")', '"ab"')),
        ("add([1], [2]) => [1, 2] and more", ("add([1], [2])", "[1, 2]")),
    ],
)
def test_inline_forms_with_plain_literals(comment, expected):
    prompt = f"// {comment}\nfunction add(a, b) {{\n"
    assert _pairs(prompt, "javascript") == [expected]


@pytest.mark.parametrize(
    "comment",
    [
        "add(x, y) == z",  # names, not values
        "add(2, 3) is the sum",  # no value
        "fn add(a, b) -> i64",  # a signature in prose
        "add(2, 3)",  # nothing said about it
    ],
)
def test_inline_forms_that_are_not_examples(comment):
    assert _pairs(f"// {comment}\nfn add(a: i64, b: i64) -> i64 {{\n", "rust") == []


def test_infill_reads_the_function_at_the_cursor_only():
    prefix = (
        "// >>> a(1)\n// 2\nfunction a(x) {\n  return x + 1;\n}\n\n"
        "// >>> b(2)\n// 4\nfunction b(x) {\n  // b(3) == 6\n  return "
    )
    suffix = "\n}\n\n// >>> c(3)\n// 9\nfunction c(x) {\n  return x * x;\n}\n"
    found = checks_for_infill(prefix, suffix, "javascript")
    assert [(c.expression, c.line) for c in found] == [("b(2)", 7), ("b(3)", 10)]
    assert checks_for_infill("const x = 1;\n", "", "javascript") == []


def test_python_stays_the_default():
    prompt = 'def add(a, b):\n    """\n    >>> add(2, 3)\n    5\n    """\n'
    assert checks_for_prompt(prompt) == checks_for_prompt(prompt, "python") == checks_for_prompt(prompt, "py")
    assert checks_for_prompt(prompt)[0].language == "python"
    assert checks_for_prompt(prompt, "javascript") == []  # `>>>` in a Python docstring is no comment of JS


@pytest.mark.parametrize(
    "language, line, expected",
    [
        ("javascript", "assert.deepStrictEqual(f(1), [2]);", ("f(1)", "[2]", VALUE)),
        ("javascript", "assert.strictEqual(f(1), 2, 'message')", ("f(1)", "2", VALUE)),
        ("javascript", "assert(f(1) === 2)", ("f(1)", "2", VALUE)),
        ("javascript", "console.assert(f(1) == 2, 'f is wrong');", ("f(1)", "2", VALUE)),
        ("javascript", "assert.ok(isEven(4))", ("isEven(4)", "", TRUTHY)),
        ("javascript", "f(1) !== 3", ("f(1) !== 3", "", TRUTHY)),
        ("typescript", "assert.deepEqual(f('a,b'), ['a', 'b'])", ("f('a,b')", "['a', 'b']", VALUE)),
        ("cpp", "assert(f(1) == 2);", ("f(1)", "2", VALUE)),
        ("cpp", "assert(f(std::vector<long>({1, 2})) == (std::vector<long>({2, 1})));", None),
        ("rust", 'assert_eq!(f(1), 2, "f({}) is wrong", 1);', ("f(1)", "2", VALUE)),
        ("rust", "assert!(is_even(4));", ("is_even(4)", "", TRUTHY)),
        ("rust", "assert!(f(1) == vec![2]);", ("f(1)", "vec![2]", VALUE)),
        ("java", "assert f(1) == 2;", ("f(1)", "2", VALUE)),
        ("java", 'assert f(1) == 2 : "f is wrong";', ("f(1)", "2", VALUE)),
        ("java", "assert(f((3l)).equals((6l)));", ("f((3l))", "(6l)", VALUE)),
        ("java", 'assert (f(1) == 2) : "f";', ("f(1)", "2", VALUE)),
    ],
)
def test_user_asserts_in_each_language(language, line, expected):
    (check,) = parse_user_checks(line, language)
    if expected is None:  # the comparison is read as written
        expected = ("f(std::vector<long>({1, 2}))", "(std::vector<long>({2, 1}))", VALUE)
    assert (check.expression, check.expected, check.compare) == expected
    assert check.origin == "assert" and check.language == language and check.line == 1


def test_user_asserts_skip_comments_and_name_a_bad_line():
    found = parse_user_checks("// the basics\nassert(f(1) == 2);\n\nassert(f(2) == 4);\n", "cpp")
    assert [c.line for c in found] == [2, 4]
    with pytest.raises(ValueError, match=r"check line 2 \('assert\(f\(1\) =='\) is not an assert of javascript"):
        parse_user_checks("assert(f(0) === 0)\nassert(f(1) ==\n", "javascript")
    with pytest.raises(ValueError, match="checks written in Go are not read"):
        parse_user_checks("if f(1) != 2 { panic() }", "go")
    with pytest.raises(ValueError, match="not known"):
        parse_user_checks("assert(f(1))", "cobol")


def test_odd_comments_cost_little_and_raise_nothing():
    import time

    started = time.monotonic()
    prompt = "// f(1) == " + "[" * 5000 + "\n// >>> f(" + "(" * 5000 + "1\n// 1\n// " + "f(1) " * 20000 + "\n"
    assert checks_for_prompt(prompt + "function f(x) {\n", "javascript") == []
    assert checks_for_prompt("/* " + "/*" * 20000 + "\n" + "'" * 20000 + "\nfn f() {\n", "rust") == []
    assert time.monotonic() - started < 2.0
    with pytest.raises(ValueError, match="check line 1"):
        parse_user_checks("assert(" + "(" * 1900 + ")", "cpp")
