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
Prints a table and, as its last line, one JSON object. The pieces: infill_client.py (the /infill client),
servers.py (the two servers), editor_requests.py (the plugins' bodies), editor_session.py (the planned steps),
editor_ring.py (llama.vim's ring), editor_replay.py (sending them, the tally, the table).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import nullcontext

from benchmarks.editor_replay import print_first_lines, print_table, replay
from benchmarks.editor_requests import VSCODE_COMPLETIONS, Step
from benchmarks.editor_session import ring_session, session
from benchmarks.infill_client import warmup_body
from benchmarks.servers import add_server_arguments, model_name, server_names, serving
from engine.quant.cpu import cpu_description

MODES = ("lines", "keys", "cold", "ring")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The options, checked; --modes and --keys as lists, --k the plugin's where --plugin llama.vscode sets it."""
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
    if any(m not in MODES for m in modes):
        parser.error(f"--modes {args.modes!r}: choose from lines, keys, cold, ring")
    if "ring" in modes and args.plugin == "none":
        parser.error("--modes ring replays a plugin's ring of extra context: give --plugin llama.vim or llama.vscode")
    if args.plugin == "llama.vscode":
        args.k = VSCODE_COMPLETIONS  # the plugin's n_cmpl: the servers' slots
    if not 1 <= args.k <= 32:
        parser.error(f"--k {args.k} is out of range: 1..32")
    args.modes, args.keys = modes, [int(x) for x in args.keys.split(",")]
    return args


def plan_session(args: argparse.Namespace, files: list[str]) -> dict[str, list[Step]]:
    """The steps of every mode, planned before any server starts."""
    lines = {"stride": args.stride, "typed": args.typed, "n_prefix": args.n_prefix, "n_suffix": args.n_suffix}
    return {
        mode: ring_session(files, args.steps, updates=args.ring_updates, seed=args.seed, **lines)
        if mode == "ring"
        else session(files, args.steps, mode, keys=args.keys, **lines)
        for mode in args.modes
    }


def run_servers(args: argparse.Namespace, model: str, plan: dict[str, list[Step]], log_dir: str) -> tuple[dict, dict]:
    """Each server in turn replays every mode's steps; (results by server and mode, how each server ran)."""
    results, notes = {}, {}
    with open(args.out, "w", encoding="utf-8") if args.out else nullcontext() as out:
        for name in server_names(args.servers):  # one at a time: the CPU has two cores
            warmup = warmup_body(args.k, args.temperature)
            with serving(name, model, args, slots=args.k, log_dir=log_dir, warmup=warmup) as server:
                notes[name] = server.report()
                results[name] = {mode: replay(server, steps, args, out).summary(args.k) for mode, steps in plan.items()}
    return results, notes


def summarize(args, model: str, files: list[str], plan: dict, notes: dict, results: dict, log_dir: str) -> dict:
    """The JSON summary: the options that shape the requests, the steps per mode, the servers, the results."""
    return {
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
        "keys": args.keys,
        "steps": {mode: len(steps) for mode, steps in plan.items()},
        "servers": notes,
        "results": results,
        "log_dir": log_dir,
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    model, files = model_name(args.model), args.files.split(",")
    plan = plan_session(args, files)
    log_dir = args.log_dir or tempfile.mkdtemp(prefix="bench_editor-")
    results, notes = run_servers(args, model, plan, log_dir)
    print_table(results, args.k)
    print_first_lines(results)
    summary = summarize(args, model, files, plan, notes, results, log_dir)
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
