"""An editing session planned as llama.vim would send it: the cursor lines chosen in function bodies of real files,
what has been typed on each, and the Step (editor_requests.py) of every request, by mode (lines, keys, cold, ring)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from benchmarks.editor_requests import Step, request_at
from benchmarks.editor_ring import replay_ring

RING_VISIT = 2  # mode "ring": requests in one file before the cursor moves to the next


def module_path(module: str) -> Path:
    """The source file of a standard-library module (or any importable one, or a path)."""
    if module.endswith(".py"):
        return Path(module)
    return Path(importlib.import_module(module).__file__)


def body_lines(source: str, min_chars: int) -> list[int]:
    """1-based numbers of the code lines inside function bodies (docstrings, comments, blank and short lines
    left out), in file order."""
    lines = source.split("\n")
    numbers: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(getattr(body[0], "value", None), ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]
        if body:
            numbers.update(range(body[0].lineno, node.end_lineno + 1))

    def is_code(text: str) -> bool:
        stripped = text.strip()
        return len(stripped) >= min_chars and not stripped.startswith(("#", '"', "'"))

    return sorted(n for n in numbers if is_code(lines[n - 1]))


def typed_text(line: str, chars: int) -> str:
    """The line's indentation and its first `chars` characters after it (at least one character left; 0: the
    indentation only, nothing typed yet)."""
    indent = len(line) - len(line.lstrip())
    return line[: indent + min(chars, len(line.strip()) - 1)]


def session(
    files: list[str], steps: int, mode: str, *, stride: int, typed: int, keys: list[int], n_prefix: int, n_suffix: int
) -> list[Step]:
    """`steps` requests of one mode, spread over the files (about steps / len(files) each, going down each file);
    mode "cold": one request per file, the cursor on its last body line and the whole file before it (the first
    request on a long file, which no cache can help)."""
    if mode == "cold":
        return [cold_step(module, typed, n_suffix) for module in files][:steps]
    per_request = 1 if mode == "lines" else len(keys)
    cursors_per_file = -(-steps // (per_request * len(files)))  # ceiling
    chosen: list[Step] = []
    for module in files:
        path = module_path(module)
        source = path.read_text(encoding="utf-8")
        lines = source.split("\n")
        for number in body_lines(source, min_chars=max(keys + [typed]) + 2)[::stride][:cursors_per_file]:
            for chars in [typed] if mode == "lines" else keys:
                prompt = typed_text(lines[number - 1], chars)
                prefix, suffix = request_at(lines, number - 1, prompt, n_prefix, n_suffix)
                chosen.append(Step(mode, path.name, number, prefix, prompt, suffix, lines[number - 1]))
    return chosen[:steps]


def ring_session(
    files: list[str], steps: int, *, stride: int, typed: int, n_prefix: int, n_suffix: int, updates: int, seed: int
) -> list[Step]:
    """Mode "ring": `steps` requests whose cursor moves between the files' functions, RING_VISIT lines in one file
    and then the next file's (round the files again from where each was left), each request carrying llama.vim's
    ring of extra context as the plugin would have built it by then (benchmarks/editor_ring.py), `updates` ring
    updates and their warm-ups before it; the chunks come from the files as written at each request (as_written)."""
    cursors = ring_cursors(files, steps, stride=stride, typed=typed)
    chosen = []
    buffers = [as_written(cursors, index, typed) for index in range(len(cursors))]
    visits = replay_ring(buffers, updates_between=updates, seed=seed)
    for (name, lines, row), (_, written, _), visit in zip(cursors, buffers, visits):
        prompt = written[row]  # the cursor line as typed
        prefix, suffix = request_at(lines, row, prompt, n_prefix, n_suffix)
        chosen.append(
            Step(
                "ring",
                name,
                row + 1,
                prefix,
                prompt,
                suffix,
                lines[row],
                visit.extra,
                visit.warmups,
                visit.ring_settled,
            )
        )
    return chosen


def ring_cursors(files: list[str], steps: int, *, stride: int, typed: int) -> list[tuple[str, list[str], int]]:
    """The first `steps` cursors of a ring session, (file name, the file's lines, 0-based row): RING_VISIT rows of
    one file's function bodies, then the next file's, round the files again from where each was left."""
    texts = {module: module_path(module).read_text(encoding="utf-8") for module in files}
    rows = {m: [n - 1 for n in body_lines(text, min_chars=typed + 2)[::stride]] for m, text in texts.items()}
    names = {module: module_path(module).name for module in files}
    split = {module: text.split("\n") for module, text in texts.items()}  # each file's lines, once
    cursors = []
    for turn in range(steps):  # enough turns for `steps` cursors even when a file runs out
        for module in files:
            for row in rows[module][turn * RING_VISIT : (turn + 1) * RING_VISIT]:
                cursors.append((names[module], split[module], row))
    return cursors[:steps]


def as_written(cursors: list[tuple[str, list[str], int]], index: int, typed: int) -> tuple[str, list[str], int]:
    """The cursor `index` of a ring session with its file as the user has it then, which is what the plugin picks
    chunks from: the cursor line holds only what is typed, and the lines the session asks for later are not
    written yet (blank), so that no chunk holds a line a request asks for."""
    name, lines, row = cursors[index]
    later = {r for n, _, r in cursors[index + 1 :] if n == name}
    buffer = ["" if number in later else line for number, line in enumerate(lines)]
    buffer[row] = typed_text(lines[row], typed)
    return name, buffer, row


def cold_step(module: str, typed: int, n_suffix: int) -> Step:
    """Mode "cold": the cursor on the file's last body line, the whole file before it in input_prefix."""
    path = module_path(module)
    source = path.read_text(encoding="utf-8")
    lines = source.split("\n")
    number = body_lines(source, min_chars=typed + 2)[-1]
    prompt = typed_text(lines[number - 1], typed)
    prefix, suffix = request_at(lines, number - 1, prompt, len(lines), n_suffix)
    return Step("cold", path.name, number, prefix, prompt, suffix, lines[number - 1])
