"""A candidate's own checks read from its code (checks/stated.py), and the candidate without its test code."""

import ast

from checks.check import TRUTHY, VALUE
from checks.stated import STATED, function_only, stated_checks

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
