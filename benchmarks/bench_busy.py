"""A request on a busy machine: one other process at nice 19 spinning on a core (an editor's indexer, a build), and
how much slower each server answers than on an idle machine, ours at 2 and at 1 torch threads against llama-server
at 2 and 1 threads, the same request (a function's prompt, k=1 greedy, --tokens new tokens, no early stop), the
same model (the bundled 1.5B: ours in its `auto` formats, llama-server on the bundled GGUF). Conditions and
methods are interleaved round by round; the median per cell counts.

    python -m benchmarks.bench_busy --rounds 3

Prints a table and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from benchmarks.servers import LLAMA_SERVER, start_llama_remote
from engine import GenerationRequest, load_engine
from engine.quant.cpu import cpu_description

PROMPT = 'def running_mean(values: list[float]) -> list[float]:\n    """The mean of each prefix of values."""\n'
MODEL = "bundled:qwen2.5-coder-1.5b"


def busy_process() -> subprocess.Popen:
    return subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--llama-server", default=str(LLAMA_SERVER))
    args = parser.parse_args(argv)
    ours = load_engine(MODEL, weights="auto")
    sources = {"ours_t2": (ours, 2), "ours_t1": (ours, 1)}
    servers = []
    for threads in (2, 1):
        server, remote, note = start_llama_remote(args.llama_server, MODEL, slots=1, threads=threads)
        if server is None:
            print(f"llama_t{threads}: {note}")
            continue
        servers.append(server)
        sources[f"llama_t{threads}"] = (remote, None)
    request = GenerationRequest(
        PROMPT, k=1, max_new_tokens=args.tokens, budget_s=600, temperature=0.0, stop_at_body_end=False
    )
    seconds = {name: {"idle": [], "busy": []} for name in sources}
    try:
        for round_ in range(args.rounds + 1):  # the first round warms up
            for condition in ("idle", "busy"):
                spinner = busy_process() if condition == "busy" else None
                time.sleep(0.5 if spinner else 0)
                try:
                    for name, (source, threads) in sources.items():
                        if threads:
                            torch.set_num_threads(threads)
                        result = source.generate(request)
                        per_token = result.stats.wall_s / max(1, result.stats.generated_tokens)
                        if round_:
                            seconds[name][condition].append(per_token)
                finally:
                    if spinner:
                        spinner.kill()
                        spinner.wait()
    finally:
        for server in servers:
            server.stop()
    table = {}
    print(f"{'method':<10}{'idle ms/token':>15}{'busy ms/token':>15}{'slowdown':>10}")
    for name, cells in seconds.items():
        idle, busy = (statistics.median(cells[c]) * 1e3 for c in ("idle", "busy"))
        table[name] = {"idle_ms_per_token": round(idle, 1), "busy_ms_per_token": round(busy, 1)}
        table[name]["slowdown"] = round(busy / idle, 2)
        print(f"{name:<10}{idle:>15.1f}{busy:>15.1f}{busy / idle:>10.2f}")
    summary = {"benchmark": "bench_busy", "tokens": args.tokens, "rounds": args.rounds, "methods": table}
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
