"""The checks a Python candidate states about its own functions, and the candidate without them.

A model's answer often ends with its own examples: `assert f(2) == 4`, `print(f(3))  # Output: 9`, a test function
that asserts, a `__main__` block. Each is a guess at the expected behaviour, written by the sample itself; read
from many samples they are evidence of the kind a model's separate tests are (CodeT), for free. Conservative, as
checks/extract.py is: only a call of the candidate's own top-level functions (literals and builtins besides) with
a literal value stated is read.

Forms read, at the top level, under `if __name__ == "__main__":` and in test functions (top-level functions whose
names begin with test or check, or `main`, that take no parameters):
- `assert f(x) == y` (a VALUE check) and `assert cond` (TRUTHY);
- `print(f(x))` with a comment on its line that states the value: `# Output: y`, `# Expected: y`, `# -> y`,
  `# => y`, `# returns y`, `# should be y`, `# y`.

`function_only` drops those parts (and every other top-level statement that calls the candidate's functions or
prints), so a candidate can be run on the others' checks without its own test code running first. `split_usage`
cuts an answer where its test code begins, for the code to be shown apart from its example usage.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from checks import stated_braced
from checks.check import MAX_CHECKS, STATED, TRUTHY, VALUE, Check
from checks.extract import _uses_only, literal_prefix

_TEST_NAME, _STATEMENT = stated_braced.TEST_NAME, stated_braced.STATEMENT  # one spelling for both kinds of code


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _is_test_function(node: ast.stmt) -> bool:
    """A top-level function that tests rather than answers: named test..., check... or main, with no parameters
    (`check_palindrome(s)` is an answer)."""
    arguments = getattr(node, "args", None)
    return (
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and bool(_TEST_NAME.search(node.name))
        and not (arguments.posonlyargs or arguments.args or arguments.vararg or arguments.kwonlyargs)
    )


def _functions(tree: ast.Module) -> set[str]:
    """The candidate's own top-level functions (test functions are not among them)."""
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_test_function(node)
    }


def _is_main_guard(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    )


def _test_code(tree: ast.Module) -> list[ast.stmt]:
    """The statements that may state checks: top level, the main guard's body, test functions' bodies."""
    found = []
    for node in tree.body:
        if _is_main_guard(node):
            found += node.body
        elif _is_test_function(node):
            found += node.body
        else:
            found.append(node)
    return found


def _comments(code: str) -> dict[int, str]:
    """{line: the text of the comment that ends it}."""
    found = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = token.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found


def _calls_own(node: ast.AST, functions: set[str]) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions for n in ast.walk(node)
    )


def _assert_check(node: ast.Assert, functions: set[str]) -> Check | None:
    test = node.test
    if not _calls_own(test, functions) or not _uses_only(test, functions, set()):
        return None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        left, right = test.left, test.comparators[0]
        if not _calls_own(left, functions):
            left, right = right, left  # `assert 4 == f(2)`
        if _calls_own(left, functions) and not _calls_own(right, functions):
            return Check(node.lineno, ast.unparse(left), ast.unparse(right), VALUE, STATED)
    return Check(node.lineno, ast.unparse(test), "", TRUTHY, STATED)


def _print_check(node: ast.Expr, functions: set[str], comments: dict[int, str]) -> Check | None:
    call = node.value
    printed = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
    if not printed or len(call.args) != 1 or call.keywords:
        return None
    argument = call.args[0]
    if not _calls_own(argument, functions) or not _uses_only(argument, functions, set()):
        return None
    comment = comments.get(node.end_lineno or node.lineno)
    if not comment:
        return None
    expected = literal_prefix(comment[_STATEMENT.match(comment).end() :])
    if expected is None:
        return None
    return Check(node.lineno, ast.unparse(argument), expected, VALUE, STATED)


def reads_stated(language: str) -> bool:
    """Whether a candidate's own checks are read in `language` (Python here, JavaScript and TypeScript in
    stated_braced)."""
    return language == "python" or language in stated_braced.SCRIPTS


def stated_checks(code: str, language: str = "python") -> list[Check]:
    """The checks a candidate's own code states (see the module's docstring; other languages: stated_braced), in
    line order, at most MAX_CHECKS; none where the code does not parse."""
    if language != "python":
        return stated_braced.stated_checks(code, language)
    tree = _parse(code)
    if tree is None:
        return []
    functions = _functions(tree)
    if not functions:
        return []
    comments = _comments(code)
    found = []
    for node in _test_code(tree):
        if isinstance(node, ast.Assert):
            found.append(_assert_check(node, functions))
        elif isinstance(node, ast.Expr):
            found.append(_print_check(node, functions, comments))
    unique = {}
    for check in found:
        if check is not None:
            unique.setdefault((check.expression, check.expected, check.compare), check)
    return list(unique.values())[:MAX_CHECKS]


def function_only(code: str, language: str = "python") -> str:
    """The candidate without its test code: the main guard, test functions, and top-level statements that are
    not definitions, imports or assignments, or that call the candidate's own functions or print (other languages:
    stated_braced). Code that does not parse comes back as it is (it will not load either way)."""
    if language != "python":
        return stated_braced.function_only(code, language)
    tree = _parse(code)
    if tree is None:
        return code
    keeps = _kept(tree)
    if all(keeps):
        return code
    lines = _lines(code)
    return "".join("".join(lines[_first_line(n) - 1 : n.end_lineno]) for n, keep in zip(tree.body, keeps) if keep)


def split_usage(code: str, language: str = "python") -> tuple[str, str]:
    """(the code, its usage): where an answer's definitions come first and its test code (as `function_only`
    reads it) follows them all and calls the answer's own functions, the text up to the last definition (with
    the indented lines after it) and the rest from there (the comments above the test code included, e.g.
    `# Example usage:`); else (code, ""). Test code between definitions, or a tail that calls none of the answer's
    functions (a program's own top-level code), is left where it is. Other languages: stated_braced."""
    if language != "python":
        return stated_braced.split_usage(code, language)
    tree = _parse(code)
    if tree is None or not tree.body:
        return code, ""
    own = _functions(tree)
    kept = _kept(tree)
    cut = kept.index(False) if False in kept else len(kept)
    tail = tree.body[cut:]
    if not own or cut == 0 or any(kept[cut:]) or not any(_calls_own(node, own) for node in tail):
        return code, ""
    if any(_reads_input(node) for node in tree.body):
        return code, ""  # a program that reads its input: its top-level code is the answer
    lines = _lines(code)
    end = tree.body[cut - 1].end_lineno
    while end < _first_line(tail[0]) - 1 and lines[end][:1] in (" ", "\t"):  # a comment indented in the last body
        end += 1
    return "".join(lines[:end]).rstrip() + "\n", "".join(lines[end:]).strip("\n") + "\n"


def _lines(code: str) -> list[str]:
    """The lines of `code`, ends kept, split at `\\n` only (as ast counts them)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", code)


def _kept(tree: ast.Module) -> list[bool]:
    """Per top-level statement, whether it is the answer rather than its test code (`_keeps`), an assignment the
    kept code reads (`PRIMES = set(sieve(100))` beside `def is_prime(n): return n in PRIMES`) kept too."""
    functions = _functions(tree) | {"print", "input"}
    keeps = [_keeps(node, functions) for node in tree.body]
    read = set().union(*(_free_names(node) for node, keep in zip(tree.body, keeps) if keep))
    for index, node in enumerate(tree.body):
        bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        if not keeps[index] and isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and bound & read:
            keeps[index] = True
    return keeps


def _free_names(node: ast.stmt) -> set[str]:
    """The names a statement reads that it does not bind itself (a function's parameters and locals are its own)."""
    loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return loads
    own = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    own |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return loads - own


_INPUTS = {"input", "open", "argparse", "fileinput"}  # names a program that reads its input calls


def _reads_input(node: ast.AST) -> bool:
    """The code reads input (input(), sys.stdin, sys.argv, a file, argparse): a program, not a usage example."""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in _INPUTS:
            return True
        if isinstance(n, ast.Attribute) and n.attr in ("stdin", "argv"):
            return True
    return False


def _keeps(node: ast.stmt, functions: set[str]) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return not _is_test_function(node)
    if isinstance(node, (ast.ClassDef, ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return not _calls_own(node, functions)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True  # a module docstring
    return False


def _first_line(node: ast.stmt) -> int:
    """Where a statement begins, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])
