"""The servers benchmarks measure, started on loopback ports: one launcher (a process in a session of its own, its
log in a file, ready once a GET answers) for our app (`python app.py`) and for llama.cpp's llama-server; the
command-line options that choose them; and the app launched in this process (load_app)."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.infill_client import post_infill

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
LLAMA_SERVER = Path.home() / ".cache/ranked-drafts/llama.cpp-0.3.36/build/bin/llama-server"
# llama.vim's recommended server (llama-server --fim-qwen-1.5b-default): batch 1024, prompt cache reuse 256 (and
# the model's whole context, --ctx-per-slot)
LLAMA_ARGS = "-b 1024 -ub 1024 --cache-reuse 256"
SERVERS = ("ours", "llama")


# ---------------------------------------------------------------- one launcher


@dataclass
class Server:
    """A started server process (ours or llama-server) on a loopback port."""

    name: str  # "ours" or "llama"
    port: int
    process: subprocess.Popen
    log_path: str  # its stdout + stderr
    note: str  # what runs, for the report
    warmup_s: float | None = None  # the untimed first request
    ready_s: float | None = None  # from the start to ready (and warmed up), where the caller timed it

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://{HOST}:{self.port}"

    def log_tail(self, chars: int = 2000) -> str:
        return Path(self.log_path).read_text(errors="replace")[-chars:]

    def report(self) -> dict:
        """What ran, how long it took to be ready, how long its warm-up took (for a benchmark's JSON summary)."""
        return {"command": self.note, "ready_s": round(self.ready_s, 1), "warmup_s": round(self.warmup_s, 3)}

    def stop(self) -> None:
        """End the server's process group: asked to end, then killed if it has not within 20 s."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """Kill the server's process group at once (a server dying mid-stream)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def launch(
    name: str, command: list[str], *, port: int, ready_path: str, note: str, log_dir: str | None, ready_within_s: float
) -> Server:
    """Run `command` (which listens on `port`) in a session of its own, its output in LOG_DIR/NAME.log (a new
    temporary directory without `log_dir`); return once GET `ready_path` answers 200."""
    log_dir = log_dir or tempfile.mkdtemp(prefix=f"{name}-")
    os.makedirs(log_dir, exist_ok=True)  # a --log-dir named on the command line need not exist yet
    log_path = os.path.join(log_dir, f"{name}.log")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    server = Server(name, port, process, log_path, note)
    wait_until_ready(server, ready_path, ready_within_s)
    return server


def wait_until_ready(server: Server, path: str, deadline_s: float) -> None:
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


# ---------------------------------------------------------------- the two servers


def model_name(spec: str) -> str:
    """'bundled:qwen2.5-coder-1.5b' or 'qwen2.5-coder-1.5b' -> the bundled name; refuses others."""
    from engine.models.loading import BUNDLED, BUNDLED_PREFIX

    name = spec.removeprefix(BUNDLED_PREFIX)
    if name not in BUNDLED:
        raise SystemExit(
            f"--model {spec!r}: choose a bundled model ({', '.join(BUNDLED)}); llama-server needs its GGUF"
        )
    return name


def bundled_gguf(model: str) -> Path:
    """The joined GGUF file of the bundled `model` (e.g. 'qwen2.5-coder-0.5b'), prepared once in the cache."""
    from engine.models.loading import BUNDLED, bundled_gguf, default_cache_dir

    return bundled_gguf(BUNDLED[model], default_cache_dir(), progress=False)


def start_llama_server(
    gguf: Path,
    *,
    binary: str,
    slots: int,
    ctx_per_slot: int,
    threads: int,
    extra_args: str = "",
    log_dir: str | None = None,
    port: int | None = None,
    ready_within_s: float = 600,
) -> Server:
    """llama-server on `gguf`: `slots` parallel slots (n_cmpl may not exceed them), `ctx_per_slot` tokens each,
    `threads` threads, --no-repack (ggml's AMX repacking crashes on this CPU), no web UI, plus `extra_args`;
    ready once GET /health answers."""
    port = port or free_port()
    context = slots * ctx_per_slot
    command = [
        binary,
        *("-m", str(gguf), "--host", HOST, "--port", str(port)),
        *("-np", str(slots), "-c", str(context), "-t", str(threads)),
        *("--no-repack", "--no-webui", *shlex.split(extra_args)),
    ]
    note = f"llama-server {gguf.name} -np {slots} -c {context} -t {threads} {extra_args}"
    return launch(
        "llama", command, port=port, ready_path="/health", note=note, log_dir=log_dir, ready_within_s=ready_within_s
    )


def start_app(model: str, *, app_args: str = "", log_dir: str | None = None, port: int | None = None) -> Server:
    """`python app.py --port P --model bundled:MODEL` plus `app_args`; ready once GET /v1/models answers (the model
    then still loads in the background)."""
    from engine.models.loading import BUNDLED_PREFIX

    port = port or free_port()
    command = [sys.executable, "app.py", "--port", str(port), "--model", BUNDLED_PREFIX + model, *shlex.split(app_args)]
    note = f"app.py --model {BUNDLED_PREFIX + model} {app_args}".strip()
    return launch("ours", command, port=port, ready_path="/v1/models", note=note, log_dir=log_dir, ready_within_s=600)


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
    """Start `name` ("ours" or "llama") on the bundled `model`, wait until it serves, send the warm-up /infill (our
    app has loaded its model once that is answered)."""
    if name == "llama":
        server = start_llama_server(
            bundled_gguf(model),
            binary=llama_server,
            slots=slots,
            ctx_per_slot=ctx_per_slot,
            threads=threads,
            extra_args=llama_args,
            log_dir=log_dir,
        )
    elif name == "ours":
        server = start_app(model, app_args=app_args, log_dir=log_dir)
    else:
        raise ValueError(f"server {name!r}: choose from {SERVERS}")
    if warmup_body is not None:
        warm_up(server, warmup_body)
    return server


def warm_up(server: Server, body: dict) -> None:
    """Send the untimed first /infill request and keep its time; stop the server and raise if it is refused."""
    with httpx.Client() as client:
        reply = post_infill(client, server.url, body)
    if reply.error:
        server.stop()
        raise RuntimeError(f"{server.name}: the warm-up /infill was refused: {reply.error}")
    server.warmup_s = reply.seconds


@contextmanager
def serving(
    name: str, model: str, args: argparse.Namespace, *, slots: int, log_dir: str, warmup: dict
) -> Iterator[Server]:
    """Server `name` started with add_server_arguments' options and warmed up with `warmup` (its ready_s timed),
    stopped on leaving."""
    started = time.monotonic()
    server = start_server(
        name,
        model,
        slots=slots,
        log_dir=log_dir,
        threads=args.threads,
        ctx_per_slot=args.ctx_per_slot,
        llama_server=args.llama_server,
        llama_args=args.llama_args,
        app_args=args.app_args,
        warmup_body=warmup,
    )
    server.ready_s = time.monotonic() - started
    try:
        yield server
    finally:
        server.stop()


def start_llama_remote(binary: str | None, model: str, *, slots: int, threads: int, ctx_per_slot: int = 2048):
    """(Server, RemoteClient, note) for llama-server on the bundled `model`'s GGUF (a 'bundled:...' spec), `slots`
    slots of `ctx_per_slot` tokens, served as model "bench" with logprobs; (None, None, why) without it."""
    from engine.models.loading import BUNDLED_PREFIX
    from engine.remote import RemoteClient, RemoteSettings

    if not binary:
        return None, None, "not run: give --llama-server BIN (.ci/build_llama_server builds it)"
    if not model.startswith(BUNDLED_PREFIX):
        return None, None, "not run: llama needs a bundled model's GGUF"
    gguf = bundled_gguf(model.removeprefix(BUNDLED_PREFIX))
    try:
        server = start_llama_server(
            gguf, binary=binary, slots=slots, ctx_per_slot=ctx_per_slot, threads=threads, extra_args="-a bench"
        )
    except RuntimeError:
        return None, None, "not run: llama-server did not become healthy"
    remote = RemoteClient(RemoteSettings(server.url + "/v1", "bench", logprobs=True))
    return server, remote, f"llama-server, {gguf.name} (Q4_K_M), n=k, {threads} threads"


# ---------------------------------------------------------------- options


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of bench_editor and bench_infill: which servers, which model, how each is started."""
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


# ---------------------------------------------------------------- the app in this process


def launch_in_process(demo, host: str = HOST) -> str:
    """Launch a Gradio `demo` (the app's Blocks as a benchmark built it) on a free port of `host` in background
    threads of this process; its URL."""
    demo.launch(server_name=host, server_port=free_port(host), prevent_thread_lock=True, quiet=True, share=False)
    return demo.local_url
