"""Repair from what failed (self-debugging, Chen et al. 2023): a candidate that fails some of the prompt's checks is
shown back to the model with the failing examples and what came back, and the model is asked for the function
again; each answer, read back as a continuation of the user's prompt, is checked and ranked like any candidate.

This module builds the request for the fix and reads its answers; benchmarks/eval_repair.py measures it against
drawing new samples at equal time. It lost there (docs/MEASUREMENTS.md), so the app's search draws new samples
and does not repair: the method stays here with its measurement.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

import rerank
from checks import Check
from checks.check import TRUTHY, VALUE
from checks.extract import PARSE_ERRORS, top_level_functions
from checks.runner import ERROR, FAILED, PASSED, TIMEOUT, CandidateChecks
from engine import ChatTurn, GenerationRequest, GenerationResult, split_answer
from engine.text.chat import INSTRUCTION
from engine.types import MAX_NEW_TOKENS

FIX = (  # without the docstring, the answer is a third of the tokens (measured: 2720 against 845 for 12 rows)
    "This code is wrong:\n{failures}\nWrite the corrected function `{name}` in one ```python block: the same "
    "signature and the body, without the docstring, with any imports it needs."
)


@dataclass(frozen=True)
class RepairSettings:
    """How a fix is asked for."""

    failures_shown: int = 3  # failing checks quoted to the model, at most
    value_chars: int = 200  # of a value or an error quoted, at most
    every: int = 1  # of the search's further rounds, the 1st, (1 + every)th... repair; the others resample

    def repairs(self, rounds_done: int) -> bool:
        """Whether the round after `rounds_done` rounds asks for a fix (else it draws new samples)."""
        return (rounds_done - 1) % self.every == 0

    def __post_init__(self):
        if not 1 <= self.failures_shown <= 20:
            raise ValueError(f"failures_shown={self.failures_shown!r} is out of range: it must be in 1..20")
        if not 20 <= self.value_chars <= 10_000:
            raise ValueError(f"value_chars={self.value_chars!r} is out of range: it must be in 20..10000")
        if not 1 <= self.every <= 64:
            raise ValueError(f"every={self.every!r} is out of range: it must be in 1..64")


def repair_target(texts: list[str], passed: list[int], n_checks: int, repaired: set[str]) -> int | None:
    """The candidate to repair: the best-ranked (checks first, then the default ranking) that fails a check, has
    code and was not repaired yet; None where there is none."""
    ranked = rerank.rank(texts, evidence=[rerank.Evidence("checks_passed", passed)])
    order = [group.indices[0] for group in ranked]  # one per distinct text
    return next((i for i in order if passed[i] < n_checks and texts[i].strip() and texts[i] not in repaired), None)


def _cut(text: str, chars: int) -> str:
    text = " ".join(text.split()) if "\n" not in text.strip() else text.strip()
    return text if len(text) <= chars else text[: chars - 3] + "..."


def failure_lines(
    checks: list[Check], outcome: CandidateChecks, settings: RepairSettings = RepairSettings()
) -> list[str]:
    """One sentence per failing check (the first `failures_shown`): the call, what it should give, what came back."""
    lines = []
    for check, result in zip(checks, outcome.outcomes):
        if result.status == PASSED:
            continue
        got = _cut(result.got, settings.value_chars)
        if check.compare == TRUTHY:
            wanted = f"`assert {check.expression}` should hold"
        elif check.compare == VALUE:
            wanted = f"`{check.expression}` should return `{_cut(check.expected, settings.value_chars)}`"
        else:
            wanted = f"`{check.expression}` should print `{_cut(check.expected, settings.value_chars)}`"
        if result.status == FAILED:
            lines.append(f"- {wanted}, but it gave `{got}`." if got else f"- {wanted}, but it does not.")
        elif result.status == ERROR:
            lines.append(f"- {wanted}, but it raised {got}.")
        elif result.status == TIMEOUT:
            lines.append(f"- {wanted}, but it ran past the time limit.")
        if len(lines) == settings.failures_shown:
            break
    return lines


def repair_request(
    request: GenerationRequest,
    candidate: str,
    name: str,
    checks: list[Check],
    outcome: CandidateChecks,
    settings: RepairSettings = RepairSettings(),
) -> GenerationRequest | None:
    """The request in words that shows the model `candidate` (a continuation of request.prompt) and the checks it
    fails, and asks for function `name` again (the first row greedy, the others sampled); None where it fails
    none."""
    lines = failure_lines(checks, outcome, settings)
    if not lines:
        return None
    code = (request.prompt + candidate).rstrip("\n")
    fix = FIX.format(failures="\n".join(lines), name=name)
    turns = (
        ChatTurn("user", INSTRUCTION.format(language="Python", fence="python", code=request.prompt.rstrip("\n"))),
        ChatTurn("assistant", f"```python\n{code}\n```"),
        ChatTurn("user", fix),
    )
    tokens = min(MAX_NEW_TOKENS, 2 * request.max_new_tokens)  # the answer repeats the signature (and docstring)
    return replace(
        request,
        prompt=fix,
        turns=turns,
        stop=(),
        stop_at_body_end=False,
        greedy_first=True,
        max_new_tokens=tokens,
    )


def _function(code: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function `code` ends in, at its top level; None where it ends otherwise or does not parse."""
    try:
        tree = ast.parse(code)
    except PARSE_ERRORS:
        return None
    last = tree.body[-1] if tree.body else None
    return last if isinstance(last, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def body_indent(prompt: str) -> str | None:
    """The indentation of the body of the top-level function the prompt ends in, where the prompt ends before any
    statement of that body (a signature, perhaps a docstring): a fix's body goes there. None otherwise (a prompt
    that ends inside a body, or not in a function)."""
    lines = prompt.splitlines()
    defs = [i for i, line in enumerate(lines) if re.match(r"(?:async\s+)?def\s", line)]
    after = [line for line in lines[defs[-1] + 1 :] if line.strip()] if defs else []
    tried = [line[: len(line) - len(line.lstrip())] for line in after[:1]] + ["    ", "\t"]
    for indent in dict.fromkeys(t for t in tried if t):
        function = _function(prompt.rstrip("\n") + "\n" + indent + "pass\n")
        if function is None:
            continue
        rest = function.body[1:] if _is_docstring(function.body[0]) else function.body
        if len(rest) == 1 and isinstance(rest[0], ast.Pass) and rest[0].col_offset == len(indent):
            return indent
    return None


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs] + [
        a.arg for a in (args.vararg, args.kwarg) if a is not None
    ]


def continuation(prompt: str, answer: str, name: str) -> str | None:
    """An answer to a repair request read as a continuation of `prompt` (which ends where its function's body
    begins, body_indent): the body of the answer's function `name` after its docstring, then the answer's other
    top-level imports, definitions and constants that the prompt does not define (helpers it calls). None where
    the answer does not parse, holds no such function with a body, names its parameters otherwise than the prompt
    or decorates it (the prompt's function would not be the one fixed)."""
    indent = body_indent(prompt)
    if indent is None:
        return None
    wanted = _function(prompt.rstrip("\n") + "\n" + indent + "pass\n")
    code = split_answer(answer).code or answer
    try:
        tree = ast.parse(code)
    except PARSE_ERRORS:
        return None
    found = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if not found or wanted is None:
        return None
    function = found[-1]
    if function.decorator_list or _parameters(function) != _parameters(wanted):
        return None
    body = function.body[1:] if _is_docstring(function.body[0]) else function.body
    if not body:
        return None  # a docstring alone
    lines = code.splitlines(keepends=True)
    if body[0].lineno == function.lineno:  # `def f(x): return x`: the body begins on the def's line
        first = lines[body[0].lineno - 1][body[0].col_offset :]
        text = indent + "".join([first] + lines[body[0].lineno : function.end_lineno]).rstrip("\n") + "\n"
    else:
        text = _reindented("".join(lines[body[0].lineno - 1 : function.end_lineno]), body[0].col_offset, indent)
    defined = set(top_level_functions(prompt)) | {name}
    for node in tree.body:
        if node is not function and _kept(node, defined):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
            text += "\n\n" + "".join(lines[start : node.end_lineno]).rstrip("\n") + "\n"
    return ("" if prompt.endswith("\n") else "\n") + text


def _kept(node: ast.stmt, defined: set[str]) -> bool:
    """Whether an answer's top-level statement goes with the fix: an import, a definition of a name the prompt
    does not define, a constant (an assignment that calls nothing); never a test, a print or a call."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name not in defined
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return node.value is not None and not any(isinstance(n, ast.Call) for n in ast.walk(node.value))
    return False


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _reindented(body: str, indent: int, wanted: str) -> str:
    """The body's lines moved from `indent` columns to the prompt's indentation `wanted`."""
    out = []
    for line in body.splitlines(keepends=True):
        spaces = len(line) - len(line.lstrip(" \t"))
        out.append(wanted + line[min(spaces, indent) :] if line.strip() else line)
    return "".join(out).rstrip("\n") + "\n"


def as_continuations(result: GenerationResult, prompt: str, name: str) -> GenerationResult:
    """A repair round's answers read back as continuations of `prompt` that define function `name` (continuation);
    an answer without the function is dropped. Their tokens are the answer's (its fences, signature and docstring,
    copied and so likely), not the continuation's: they are left out, so the ranking reads no probability into
    them (as for a source that gives none)."""
    read = [(row, continuation(prompt, row.text, name)) for row in result.candidates]
    rows = [replace(row, text=text, token_ids=[], logprobs=[]) for row, text in read if text is not None]
    return GenerationResult(rows, result.stats)
