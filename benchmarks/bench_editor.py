"""The editor loop: an editing session replayed on standard-library modules as llama.vim sends it, `POST /infill`
(llama.cpp's protocol) to our app and to llama.cpp's llama-server, one server at a time; what the user waits for.

The session goes down each file (--files; default shlex, fnmatch, textwrap) through lines inside function bodies
(every --stride-th such line). At each, the "user" has typed the line's first --typed characters after its
indentation; the request is llama.vim's: input_prefix = up to --n-prefix lines before the cursor line, each ended
by "\\n"; prompt = the cursor line as typed; input_suffix = the rest of the line (nothing: the file is being
written) + "\\n" + up to --n-suffix following lines + "\\n". Modes (--modes):
  lines   one request per cursor line
  keys    the same line typed in chunks (--keys chars after the indentation, e.g. 1,3,5): a request per chunk,
          as llama.vim asks again while one types
  cold    one request per file at its end, the whole file before the cursor
  ring    (--plugin) the cursor moves between the files, two lines in one, then the next; every request
          carries llama.vim's ring of extra context as the plugin builds it (benchmarks/editor_ring.py), after
          --ring-updates ring updates, each sent as the plugin's warm-up (n_predict 0, timed apart); reported
          apart for the requests sent with a settled ring (full, or every chunk picked so far in it, at least
          8): their p50 / p90, and the share of the ring's tokens (as the latest warm-up read them) that their
          prompts took from the cache
Every request asks for --k alternatives (n_cmpl; ours answers them ranked, best first), --n-predict tokens,
--temperature, llama.vim's top_k / top_p / samplers, cache_prompt, and a t_max_predict_ms long enough that both
servers end by themselves; or, with --plugin llama.vim or llama.vscode, that plugin's own default body (then the
suggestion's first line is scored against the file's line). Each request is timed on the client, from the send
to the whole answer (ours: all k ranked). Each server first gets one untimed warm-up request (another text): our
app loads its model then. Prompt tokens computed and cached are read from each answer's timings (prompt_n,
cache_n), from the second timed request of a mode on.

Example: python -m benchmarks.bench_editor --model qwen2.5-coder-0.5b --steps 6 --servers llama
Prints a table and, as its last line, one JSON object. This module also holds the /infill client and the two
servers' launchers that benchmarks/bench_infill.py uses.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parent.parent
LLAMA_SERVER = Path.home() / ".cache/ranked-drafts/llama.cpp-0.3.36/build/bin/llama-server"
# llama.vim's recommended server (llama-server --fim-qwen-1.5b-default): batch 1024, prompt cache reuse 256 (and
# the model's whole context, --ctx-per-slot)
LLAMA_ARGS = "-b 1024 -ub 1024 --cache-reuse 256"
SERVERS = ("ours", "llama")
VSCODE_COMPLETIONS = 3  # llama.vscode's max_parallel_completions: its n_cmpl
RING_VISIT = 2  # mode "ring": requests in one file before the cursor moves to the next
WARMUP = {"input_prefix": "def add(a, b):\n", "input_suffix": "\n", "prompt": "    return", "input_extra": []}


# ---------------------------------------------------------------- the /infill client


@dataclass
class Reply:
    """One /infill answer as the client saw it."""

    seconds: float  # end to end on the client
    contents: list[str]  # the middles, in the server's order (ours: best first)
    prompt_n: int | None  # prompt tokens computed (the first result's timings)
    cache_n: int | None  # prompt tokens taken from the cache
    predicted_n: int  # tokens generated, all results together
    ranks: list[int] | None = None  # ours: ranked_drafts.rank of each result
    error: str = ""  # HTTP status and text of a refused request
    first_line_right: bool | None = None  # the first suggestion's first line equals the file's line
    first_line_similarity: float | None = None


def infill_body(
    prefix: str,
    suffix: str,
    prompt: str,
    *,
    k: int,
    n_predict: int,
    temperature: float,
    top_p: float,
    top_k: int,
    samplers: list[str] | None,
    t_max_predict_ms: int,
    extra: list[dict] | None = None,
) -> dict:
    """A llama.cpp /infill request body (non-streaming, prompt cache on)."""
    body = {
        "input_prefix": prefix,
        "input_suffix": suffix,
        "input_extra": extra or [],
        "prompt": prompt,
        "n_predict": n_predict,
        "n_cmpl": k,
        "temperature": temperature,
        "top_p": top_p,
        "top_k": top_k,
        "cache_prompt": True,
        "t_max_predict_ms": t_max_predict_ms,
        "stream": False,
    }
    if samplers:
        body["samplers"] = samplers
    return body


def post_infill(client: httpx.Client, url: str, body: dict, timeout_s: float = 600.0) -> Reply:
    """Send one /infill request and read its answer: one object for n_cmpl=1, an array for more."""
    started = time.perf_counter()
    response = client.post(url + "/infill", json=body, timeout=timeout_s)
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        return Reply(seconds, [], None, None, 0, error=f"HTTP {response.status_code}: {response.text[:300]}")
    data = response.json()
    results = data if isinstance(data, list) else [data]
    timings = [
        r.get("timings")
        or {
            key.split("/", 1)[1]: value
            for key, value in r.items()  # response_fields
            if key.startswith("timings/")
        }
        for r in results
    ]
    ranked = all(r.get("ranked_drafts") for r in results)  # ours; a warm-up's is null
    ranks = [r["ranked_drafts"].get("rank") for r in results] if ranked else None
    return Reply(
        seconds,
        [r.get("content", "") for r in results],
        timings[0].get("prompt_n"),
        timings[0].get("cache_n"),
        sum(int(t.get("predicted_n") or 0) for t in timings),
        ranks,
    )


# ---------------------------------------------------------------- the two servers


@dataclass
class Server:
    """A started server process (ours or llama-server) on a loopback port."""

    name: str  # "ours" or "llama"
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen
    log_path: str  # its stdout + stderr
    note: str  # what runs, for the report
    warmup_s: float | None = None  # the untimed first request

    def log_tail(self, chars: int = 2000) -> str:
        return Path(self.log_path).read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """End the server's process group (it was started in a session of its own)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def model_name(spec: str) -> str:
    """'bundled:qwen2.5-coder-1.5b' or 'qwen2.5-coder-1.5b' -> the bundled name; refuses others."""
    from engine.models.loading import BUNDLED, BUNDLED_PREFIX

    name = spec.removeprefix(BUNDLED_PREFIX)
    if name not in BUNDLED:
        raise SystemExit(
            f"--model {spec!r}: choose a bundled model ({', '.join(BUNDLED)}); llama-server needs its GGUF"
        )
    return name


def _spawn(command: list[str], log_dir: str, name: str) -> tuple[subprocess.Popen, str]:
    log_path = os.path.join(log_dir, f"{name}.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    return process, log_path


def _wait_until(server: Server, path: str, deadline_s: float) -> None:
    """Poll GET `path` until it answers 200; raise with the log's tail if the server exits or the time runs out."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited ({server.process.returncode}): {server.log_tail()}")
        try:
            if httpx.get(server.url + path, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"{server.name}: GET {path} did not answer within {deadline_s:g} s: {server.log_tail()}")


def start_server(
    name: str,
    model: str,
    *,
    slots: int,
    log_dir: str,
    threads: int = 2,
    ctx_per_slot: int = 32768,
    llama_server: str = str(LLAMA_SERVER),
    llama_args: str = LLAMA_ARGS,
    app_args: str = "",
    warmup_body: dict | None = None,
) -> Server:
    """Start `name` ("ours" or "llama") on the bundled `model`, wait until it serves, send the warm-up request.

    llama: llama-server on the bundled GGUF, `slots` parallel slots (n_cmpl may not exceed them), `threads`
    threads, --no-repack (ggml's AMX repacking crashes on this CPU), plus `llama_args`.
    ours: `python app.py --port P --model bundled:MODEL` plus `app_args`; ready once GET /v1/models answers and the
    warm-up /infill has been answered (the model loads in the background at start-up).
    """
    from benchmarks.local_app import free_port
    from engine.models.loading import BUNDLED, BUNDLED_PREFIX, bundled_gguf, default_cache_dir

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if name == "llama":
        gguf = bundled_gguf(BUNDLED[model], default_cache_dir(), progress=False)
        command = [
            llama_server,
            "-m",
            str(gguf),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-np",
            str(slots),
            "-c",
            str(slots * ctx_per_slot),
            "-t",
            str(threads),
            "--no-repack",
            "--no-webui",
            *shlex.split(llama_args),
        ]
        note = f"llama-server {gguf.name} -np {slots} -c {slots * ctx_per_slot} -t {threads} {llama_args}"
        ready_path = "/health"
    elif name == "ours":
        command = [
            sys.executable,
            "app.py",
            "--port",
            str(port),
            "--model",
            BUNDLED_PREFIX + model,
            *shlex.split(app_args),
        ]
        note = f"app.py --model {BUNDLED_PREFIX + model} {app_args}".strip()
        ready_path = "/v1/models"
    else:
        raise ValueError(f"server {name!r}: choose from {SERVERS}")
    process, log_path = _spawn(command, log_dir, name)
    server = Server(name, url, process, log_path, note)
    _wait_until(server, ready_path, 600)
    if warmup_body is not None:
        with httpx.Client() as client:
            reply = post_infill(client, url, warmup_body)
        if reply.error:
            server.stop()
            raise RuntimeError(f"{name}: the warm-up /infill was refused: {reply.error}")
        server.warmup_s = reply.seconds
    return server


def warmup_body(k: int, temperature: float) -> dict:
    """The untimed first request of every server: a tiny function, k alternatives."""
    return {
        **WARMUP,
        "n_predict": 8,
        "n_cmpl": k,
        "temperature": temperature,
        "cache_prompt": True,
        "t_max_predict_ms": 60000,
        "stream": False,
    }


# ---------------------------------------------------------------- the editing session


@dataclass(frozen=True)
class Step:
    """One request of the session: where the cursor is and what has been typed on its line."""

    mode: str  # "lines", "keys", "cold" or "ring"
    file: str  # the module's file name
    line: int  # 1-based cursor line
    prefix: str  # input_prefix
    prompt: str  # the cursor line as typed
    suffix: str  # input_suffix
    real: str = ""  # the cursor line as the file has it (what a right suggestion completes it to)
    extra: tuple[dict, ...] = ()  # input_extra: mode "ring", the plugin's ring of chunks
    warmups: tuple[tuple[dict, ...], ...] = ()  # mode "ring": the ring each warm-up before the request sends
    ring_settled: bool = False  # mode "ring": full, or every chunk picked so far in it (8 or more)


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


def request_at(lines: list[str], index: int, typed: str, n_prefix: int, n_suffix: int) -> tuple[str, str]:
    """(input_prefix, input_suffix) as llama.vim builds them with the cursor at the end of `typed` on line `index`
    (0-based): the cursor line holds only what was typed, so its rest is empty."""
    before = lines[max(0, index - n_prefix) : index]
    after = lines[index + 1 : index + 1 + n_suffix]
    prefix = "".join(line + "\n" for line in before)
    return prefix, "\n" + "\n".join(after) + "\n"  # rest of the cursor line (empty), then the lines after


def typed_text(line: str, chars: int) -> str:
    """The line's indentation and its first `chars` characters after it (at least one character left; 0: the
    indentation only, nothing typed yet)."""
    indent = len(line) - len(line.lstrip())
    return line[: indent + min(chars, len(line.strip()) - 1)]


def llama_vim_body(step: Step, temperature: float | None = None) -> dict:
    """The request llama.vim sends by default (autoload/llama.vim at a1c8e6e, its g:llama_config defaults): no
    n_cmpl and no temperature (the server's own default applies unless `temperature` is given), n_predict 128,
    top_k 40, top_p 0.90, its samplers, n_indent the cursor line's indentation (a line of blanks: prompt "" and
    n_indent 0, s:fim_ctx_local's special case), t_max_prompt_ms 500,
    t_max_predict_ms 250 (llama#fim's first request at a position; its speculative follow-up, not sent here, has
    1000), the fields it reads back (and timings/cache_n, which the plugin does not ask for), the step's ring as
    input_extra."""
    body = {
        "id_slot": 0,
        "input_prefix": step.prefix,
        "input_suffix": step.suffix,
        "input_extra": list(step.extra),
        "prompt": step.prompt if step.prompt.strip() else "",
        "n_predict": 128,
        "stop": [],
        "n_indent": len(step.prompt) - len(step.prompt.lstrip()) if step.prompt.strip() else 0,
        "top_k": 40,
        "top_p": 0.90,
        "samplers": ["top_k", "top_p", "infill"],
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 250,
        "response_fields": [
            "content",
            "timings/prompt_n",
            "timings/prompt_ms",
            "timings/prompt_per_token_ms",
            "timings/prompt_per_second",
            "timings/predicted_n",
            "timings/predicted_ms",
            "timings/predicted_per_token_ms",
            "timings/predicted_per_second",
            "truncated",
            "tokens_cached",
            "timings/cache_n",
        ],
    }
    if temperature is not None:
        body["temperature"] = temperature
    return body


def llama_vscode_body(step: Step, temperature: float | None = None) -> dict:
    """The request llama.vscode sends by default (src/llama-server.ts and package.json at v0.0.63, 3938fb3):
    n_cmpl 3 (max_parallel_completions), n_predict 128, top_k 40, top_p 0.99, its samplers, no temperature,
    t_max_prompt_ms 500, t_max_predict_ms 500, n_indent only when the line is indented, the cursor line as typed
    in `prompt` but "" when only blanks are typed (src/completion.ts), the step's ring as input_extra."""
    indent = len(step.prompt) - len(step.prompt.lstrip())
    body = {
        "id_slot": 0,
        "input_prefix": step.prefix,
        "input_suffix": step.suffix,
        "input_extra": list(step.extra),
        "prompt": step.prompt if step.prompt.strip() else "",
        "n_predict": 128,
        "n_cmpl": VSCODE_COMPLETIONS,
        "top_k": 40,
        "top_p": 0.99,
        "stream": False,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": True,
        **({"n_indent": indent} if indent else {}),
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 500,
    }
    if temperature is not None:
        body["temperature"] = temperature
    return body


def plugin_body(plugin: str, step: Step, temperature: float | None) -> dict:
    """The default suggestion request of `plugin` (llama.vim or llama.vscode) at `step`."""
    return (llama_vscode_body if plugin == "llama.vscode" else llama_vim_body)(step, temperature)


def ring_warmup_body(extra: tuple[dict, ...], plugin: str = "llama.vim") -> dict:
    """The request llama.vim sends after each ring update (s:ring_update): the whole ring read into the cache,
    nothing generated; here it asks for the two timings the plugin does not read (what was computed, cached).
    llama.vscode's (extra-context.ts, the same ring rules save similarity measures) differs in a few fields."""
    body = {
        "id_slot": 0,
        "input_prefix": "",
        "input_suffix": "",
        "input_extra": list(extra),
        "prompt": "",
        "n_predict": 0,
        "temperature": 0.0,
        "samplers": [],
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": 1,
        "t_max_predict_ms": 1,
        "response_fields": ["timings/prompt_n", "timings/cache_n"],  # the plugin asks for [""]: it reads nothing
    }
    if plugin == "llama.vscode":  # its warm-up (createRequestPayload with noPredict): no temperature, its limits
        del body["temperature"], body["stream"], body["response_fields"]
        body["t_max_prompt_ms"] = 500
    return body


def first_line_scores(step: Step, content: str) -> tuple[bool, float]:
    """(the suggestion's first line completes the cursor line exactly, their edit similarity), compared without
    trailing blanks, as a user accepting the first line sees it."""
    import difflib

    suggested = (step.prompt + content.split("\n")[0]).rstrip()
    real = step.real.rstrip()
    return suggested == real, difflib.SequenceMatcher(None, suggested.strip(), real.strip()).ratio()


def session(
    files: list[str], steps: int, mode: str, *, stride: int, typed: int, keys: list[int], n_prefix: int, n_suffix: int
) -> list[Step]:
    """`steps` requests of one mode, spread over the files (about steps / len(files) each, going down each file);
    mode "cold": one request per file, the cursor on its last body line and the whole file before it (the first
    request on a long file, which no cache can help)."""
    if mode == "cold":
        return [_cold_step(module, typed, n_suffix) for module in files][:steps]
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
    from benchmarks.editor_ring import replay_ring

    texts = {module: module_path(module).read_text(encoding="utf-8") for module in files}
    rows = {m: [n - 1 for n in body_lines(text, min_chars=typed + 2)[::stride]] for m, text in texts.items()}
    names = {module: module_path(module).name for module in files}
    split = {module: text.split("\n") for module, text in texts.items()}  # each file's lines, once
    cursors = []
    for turn in range(steps):  # enough turns for `steps` cursors even when a file runs out
        for module in files:
            for row in rows[module][turn * RING_VISIT : (turn + 1) * RING_VISIT]:
                cursors.append((names[module], split[module], row))
    cursors = cursors[:steps]
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


def as_written(cursors: list[tuple[str, list[str], int]], index: int, typed: int) -> tuple[str, list[str], int]:
    """The cursor `index` of a ring session with its file as the user has it then, which is what the plugin picks
    chunks from: the cursor line holds only what is typed, and the lines the session asks for later are not
    written yet (blank), so that no chunk holds a line a request asks for."""
    name, lines, row = cursors[index]
    later = {r for n, _, r in cursors[index + 1 :] if n == name}
    buffer = ["" if number in later else line for number, line in enumerate(lines)]
    buffer[row] = typed_text(lines[row], typed)
    return name, buffer, row


def _cold_step(module: str, typed: int, n_suffix: int) -> Step:
    path = module_path(module)
    source = path.read_text(encoding="utf-8")
    lines = source.split("\n")
    number = body_lines(source, min_chars=typed + 2)[-1]
    prompt = typed_text(lines[number - 1], typed)
    prefix, suffix = request_at(lines, number - 1, prompt, len(lines), n_suffix)
    return Step("cold", path.name, number, prefix, prompt, suffix, lines[number - 1])


# ---------------------------------------------------------------- running and reporting


@dataclass
class Tally:
    """One server on one mode: the timed requests in order."""

    replies: list[Reply] = field(default_factory=list)
    warmups: list[Reply] = field(default_factory=list)  # mode "ring": the warm-ups of the ring's updates
    ring_tokens: int = 0  # mode "ring": prompt tokens of the latest warm-up (the ring as the server reads it)
    ring_read: list[int | None] = field(default_factory=list)  # per reply: ring_tokens if the ring was settled

    def ring_summary(self) -> dict:
        """Mode "ring", the requests sent with a settled ring: their times, and how much of the ring's tokens (as the
        latest warm-up read them) their prompts took from the cache (an estimate: the ring comes first in both
        servers' prompts, and the cursor's lines, which follow it, have moved since the last request)."""
        settled = [(r, ring) for r, ring in zip(self.replies, self.ring_read) if ring and not r.error]
        seconds = [r.seconds for r, _ in settled]
        warm = [w for w in self.warmups if not w.error]
        p50, p90 = np.percentile(seconds, [50, 90]) if seconds else (None, None)
        ring_total = sum(ring for _, ring in settled)
        warm_total = sum((w.prompt_n or 0) + (w.cache_n or 0) for w in warm)
        return {
            "ring_settled_requests": len(settled),
            "ring_settled_p50_s": None if p50 is None else round(float(p50), 3),
            "ring_settled_p90_s": None if p90 is None else round(float(p90), 3),
            "ring_settled_mean_ring_tokens": round(ring_total / len(settled), 1) if settled else None,
            "ring_reused_percent": round(100 * sum(min(r.cache_n or 0, ring) for r, ring in settled) / ring_total, 1)
            if ring_total
            else None,
            "warmups": len(self.warmups),
            "warmup_errors": len(self.warmups) - len(warm),
            "warmup_p50_s": round(float(np.percentile([w.seconds for w in warm], 50)), 3) if warm else None,
            "warmup_cached_percent": round(100 * sum(w.cache_n or 0 for w in warm) / warm_total, 1)
            if warm_total
            else None,
        }

    def summary(self, k: int) -> dict:
        ok = [r for r in self.replies if not r.error]
        later = ok[1:]
        seconds = [r.seconds for r in later]
        computed = sum(r.prompt_n or 0 for r in later)
        cached = sum(r.cache_n or 0 for r in later)
        p50, p90 = np.percentile(seconds, [50, 90]) if seconds else (None, None)
        return {
            "requests": len(self.replies),
            "errors": len(self.replies) - len(ok),
            "first_s": round(ok[0].seconds, 3) if ok else None,
            "p50_s": None if p50 is None else round(float(p50), 3),
            "p90_s": None if p90 is None else round(float(p90), 3),
            "mean_s": round(float(np.mean(seconds)), 3) if seconds else None,
            "prompt_tokens_computed": computed,
            "prompt_tokens_cached": cached,
            "cached_percent": round(100 * cached / (computed + cached), 1) if computed + cached else None,
            "mean_prompt_tokens": round((computed + cached) / len(later), 1) if later else None,
            "mean_tokens_out": round(float(np.mean([r.predicted_n for r in ok])), 1) if ok else None,
            "short_answers": sum(len(r.contents) < k for r in ok),  # fewer than k alternatives came back
            "first_line_exact_percent": round(100 * float(np.mean([r.first_line_right for r in ok])), 1)
            if ok
            else None,
            "first_line_similarity": round(float(np.mean([r.first_line_similarity for r in ok])), 3) if ok else None,
            "first_error": next((r.error for r in self.replies if r.error), None),
            **(self.ring_summary() if self.warmups else {}),
        }


def replay(server: Server, steps: list[Step], args, out) -> Tally:
    """Send the steps one after another (never two at once) and keep every reply."""
    tally = Tally()
    with httpx.Client() as client:
        for number, step in enumerate(steps):
            for ring in step.warmups:
                warm = post_infill(client, server.url, ring_warmup_body(ring, args.plugin), timeout_s=args.timeout)
                tally.warmups.append(warm)
                tally.ring_tokens = (warm.prompt_n or 0) + (warm.cache_n or 0)
            if args.plugin != "none":
                body = plugin_body(args.plugin, step, args.plugin_temperature)
            else:
                body = infill_body(
                    step.prefix,
                    step.suffix,
                    step.prompt,
                    k=args.k,
                    n_predict=args.n_predict,
                    temperature=args.temperature,
                    top_p=args.top_p,
                    top_k=args.top_k,
                    samplers=args.samplers.split(",") if args.samplers else None,
                    t_max_predict_ms=args.t_max_predict_ms,
                )
            reply = post_infill(client, server.url, body, timeout_s=args.timeout)
            if reply.contents:  # the line as the plugin shows it: what it sent as typed, then the suggestion
                shown = replace(step, prompt=body["prompt"])
                reply.first_line_right, reply.first_line_similarity = first_line_scores(shown, reply.contents[0])
            tally.replies.append(reply)
            tally.ring_read.append(tally.ring_tokens if step.ring_settled else None)
            print(
                f"  {server.name} {step.mode} {number + 1}/{len(steps)} {step.file}:{step.line} "
                f"{reply.seconds:6.2f} s prompt {reply.prompt_n}+{reply.cache_n} cached "
                f"{reply.error or (repr(reply.contents[0][:40]) if reply.contents else '')}",
                file=sys.stderr,
            )
            if out is not None:
                written = {**asdict(step), "extra": len(step.extra), "warmups": len(step.warmups)}
                out.write(json.dumps({"server": server.name, **written, **asdict(reply)}) + "\n")
    return tally


def print_table(results: dict, k: int) -> None:
    print(
        f"\nEditor loop: /infill, k={k} alternatives per request; times are end to end on the client; "
        "tokens from the 2nd request on"
    )
    print(
        f"{'server':<7}{'mode':<7}{'reqs':>5}{'first s':>9}{'p50 s':>8}{'p90 s':>8}{'computed':>10}"
        f"{'cached':>8}{'cached %':>10}{'tok out':>9}{'errors':>8}"
    )
    for server, modes in results.items():
        for mode, row in modes.items():

            def num(value, width, spec=".2f"):
                return f"{value:>{width}{spec}}" if value is not None else f"{'n/a':>{width}}"

            print(
                f"{server:<7}{mode:<7}{row['requests']:>5}{num(row['first_s'], 9)}{num(row['p50_s'], 8)}"
                f"{num(row['p90_s'], 8)}{row['prompt_tokens_computed']:>10}{row['prompt_tokens_cached']:>8}"
                f"{num(row['cached_percent'], 10, '.1f')}{num(row['mean_tokens_out'], 9, '.1f')}"
                f"{row['errors']:>8}"
            )


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared with bench_infill: which servers, which model, how each is started."""
    parser.add_argument("--servers", default="both", choices=("ours", "llama", "both"))
    parser.add_argument(
        "--model",
        default="qwen2.5-coder-1.5b",
        help="bundled model (qwen2.5-coder-1.5b or qwen2.5-coder-0.5b; bundled: prefix allowed)",
    )
    parser.add_argument("--llama-server", default=str(LLAMA_SERVER), help="llama-server binary")
    parser.add_argument(
        "--llama-args",
        default=LLAMA_ARGS,
        help="more llama-server options (default: llama.vim's recommended batch and cache reuse)",
    )
    parser.add_argument("--threads", type=int, default=2, help="llama-server threads")
    parser.add_argument(
        "--ctx-per-slot",
        type=int,
        default=32768,
        help="llama-server context per slot (-c = slots x this; default: the model's 32768 for each slot, as the "
        "preset llama.vim recommends, --fim-qwen-1.5b-default, gives its one slot with -c 0)",
    )
    parser.add_argument("--app-args", default="", help="more app.py options, e.g. '--drafter none'")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for one answer")
    parser.add_argument("--log-dir", help="servers' logs (default: a temporary directory)")
    parser.add_argument("--out", help="write every request's reply to this JSONL")


def server_names(choice: str) -> list[str]:
    return list(SERVERS) if choice == "both" else [choice]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(parser)
    parser.add_argument("--files", default="shlex,fnmatch,textwrap", help="comma-separated modules or .py paths")
    parser.add_argument("--steps", type=int, default=40, help="timed requests per mode (default 40)")
    parser.add_argument(
        "--modes",
        default="lines,keys",
        help="comma-separated of lines, keys, cold (one request per file at its end, the whole file before the cursor), "
        "ring (with --plugin: the cursor moving between the files, llama.vim's ring of extra context and its "
        "warm-ups sent as the plugin sends them)",
    )
    parser.add_argument("--stride", type=int, default=8, help="every N-th code line of function bodies")
    parser.add_argument("--typed", type=int, default=3, help="lines mode: characters typed after the indentation")
    parser.add_argument("--keys", default="1,3,5", help="keys mode: characters typed at each successive request")
    parser.add_argument("--n-prefix", type=int, default=256, help="lines before the cursor line")
    parser.add_argument("--n-suffix", type=int, default=64, help="lines after the cursor line")
    parser.add_argument("--k", type=int, default=4, help="alternatives per request (n_cmpl)")
    parser.add_argument("--n-predict", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-p", type=float, default=0.90, help="llama.vim's")
    parser.add_argument("--top-k", type=int, default=40, help="llama.vim's")
    parser.add_argument(
        "--samplers", default="top_k,top_p,infill", help="llama.vim's sampler chain ('' for the server's default)"
    )
    parser.add_argument("--t-max-predict-ms", type=int, default=20000, help="long enough to end by themselves")
    parser.add_argument(
        "--plugin",
        choices=("none", "llama.vim", "llama.vscode"),
        default="none",
        help="llama.vim: send llama.vim's default request body instead (no n_cmpl, no temperature, "
        "n_predict 128, t_max_predict_ms 250, n_indent; --k, --n-predict, --temperature and "
        "the sampling options are then not sent); llama.vscode: its default body (n_cmpl 3, top_p 0.99, "
        "t_max_predict_ms 500; --k is then 3)",
    )
    parser.add_argument(
        "--ring-updates",
        type=int,
        default=2,
        help="mode ring: ring updates (each with its warm-up) between requests (the plugin makes one a second while "
        "the user is not typing; 2 keep its queue empty)",
    )
    parser.add_argument("--seed", type=int, default=0, help="mode ring: the seed of the plugin's random chunk draws")
    parser.add_argument(
        "--plugin-temperature",
        type=float,
        default=None,
        help="with --plugin: add this temperature to the plugin's body (0: the server's greedy)",
    )
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    if any(m not in ("lines", "keys", "cold", "ring") for m in modes):
        parser.error(f"--modes {args.modes!r}: choose from lines, keys, cold, ring")
    if "ring" in modes and args.plugin == "none":
        parser.error("--modes ring replays a plugin's ring of extra context: give --plugin llama.vim or llama.vscode")
    if args.plugin == "llama.vscode":
        args.k = VSCODE_COMPLETIONS  # the plugin's n_cmpl: the servers' slots
    if not 1 <= args.k <= 32:
        parser.error(f"--k {args.k} is out of range: 1..32")
    keys = [int(x) for x in args.keys.split(",")]
    model = model_name(args.model)
    files = args.files.split(",")
    lines = {"stride": args.stride, "typed": args.typed, "n_prefix": args.n_prefix, "n_suffix": args.n_suffix}
    plan = {
        mode: ring_session(files, args.steps, updates=args.ring_updates, seed=args.seed, **lines)
        if mode == "ring"
        else session(files, args.steps, mode, keys=keys, **lines)
        for mode in modes
    }
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="bench_editor-")
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    results, notes = {}, {}
    try:
        for name in server_names(args.servers):  # one at a time: the CPU has two cores
            started = time.monotonic()
            server = start_server(
                name,
                model,
                slots=args.k,
                log_dir=log_dir,
                threads=args.threads,
                ctx_per_slot=args.ctx_per_slot,
                llama_server=args.llama_server,
                llama_args=args.llama_args,
                app_args=args.app_args,
                warmup_body=warmup_body(args.k, args.temperature),
            )
            notes[name] = {
                "command": server.note,
                "ready_s": round(time.monotonic() - started, 1),
                "warmup_s": round(server.warmup_s, 3),
            }
            try:
                results[name] = {mode: replay(server, steps, args, out).summary(args.k) for mode, steps in plan.items()}
            finally:
                server.stop()
    finally:
        if out is not None:
            out.close()
    print_table(results, args.k)
    for server, modes in results.items():
        for mode, row in modes.items():
            print(
                f"{server:<7}{mode:<7} first line exactly right {row['first_line_exact_percent']}% "
                f"edit similarity {row['first_line_similarity']}"
            )
    summary = {
        "benchmark": "bench_editor",
        "model": model,
        "files": files,
        "k": args.k,
        "plugin": args.plugin,
        "plugin_temperature": args.plugin_temperature,
        "n_predict": args.n_predict,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "samplers": args.samplers,
        "n_prefix": args.n_prefix,
        "n_suffix": args.n_suffix,
        "stride": args.stride,
        "typed": args.typed,
        "keys": keys,
        "steps": {mode: len(steps) for mode, steps in plan.items()},
        "servers": notes,
        "results": results,
        "log_dir": log_dir,
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
