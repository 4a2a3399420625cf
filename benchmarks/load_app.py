"""Load check of the app: N concurrent /generate requests through gradio_client, against a tiny model on loopback
or, with --base-url, against an OpenAI-compatible server through the remote backend.

Every request must end as completed or refused with the busy error ("Queue is full! Please try
again."); anything else is lost. With a server, it also measures the time the app adds to a request on top of the
server's own time (static analysis, ranking, transport), one k=8 HumanEval prompt at a time.
Prints a table, then one JSON line.

    python -m benchmarks.load_app [--requests 20] [--queue-size 8] [--k 4] [--budget 2]
    python -m benchmarks.load_app --base-url http://127.0.0.1:8080/v1 --served-model m --remote-concurrency 4
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from benchmarks.servers import launch_in_process
from engine.quant.cpu import cpu_description

BUSY_TEXT = "Queue is full"  # gradio_client's QueueError for a request beyond the bounded queue
PROMPT = 'def add(a, b):\n    """Return a + b."""\n'


@dataclass
class Outcome:
    kind: str  # "completed", "refused" or "lost"
    seconds: float  # from the common start to the answer (or the error)
    detail: str = ""  # the error text of a refused or lost request


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20, help="concurrent requests (default 20)")
    parser.add_argument("--queue-size", type=int, default=8, help="the app's bounded queue (default 8)")
    parser.add_argument("--k", type=int, default=4, help="candidates per request (default 4)")
    parser.add_argument("--budget", type=float, default=2.0, help="time budget per request, s (default 2)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens per candidate (default 32)")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up on a request after this long (s)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server: the app runs with the remote backend")
    parser.add_argument("--served-model", default="default", help="the server's model name")
    parser.add_argument("--remote-concurrency", type=int, default=4, help="requests the app sends at once")
    parser.add_argument("--overhead-prompts", type=int, default=5, help="k=8 HumanEval prompts for the overhead")
    return parser.parse_args(argv)


def app_overhead(client, prompts: int) -> dict:
    """Time the app adds on top of the server's own time (generation_s: from the request to the last candidate),
    one k=8 HumanEval prompt at a time, T=0.8."""
    from benchmarks.bench_engine import humaneval_prompts

    rows = []
    for prompt in humaneval_prompts(prompts):
        started = time.perf_counter()
        result = client.predict(
            prompt=prompt, k=8, budget_s=120, temperature=0.8, max_new_tokens=256, seed=0, api_name="/generate"
        )
        total = time.perf_counter() - started
        server = result["stats"]["generation_s"]
        rows.append(
            {
                "server_s": server,
                "app_s": total - server,
                "analysis_s": result["stats"]["analysis_s"],
                "ranking_s": result["stats"]["ranking_s"],
            }
        )
    server = sum(r["server_s"] for r in rows)
    app = sum(r["app_s"] for r in rows)
    return {
        "prompts": len(rows),
        "server_s": round(server, 3),
        "app_s": round(app, 3),
        "app_share_of_server": round(app / server, 4) if server else None,
        "analysis_s": round(sum(r["analysis_s"] for r in rows), 3),
        "ranking_s": round(sum(r["ranking_s"] for r in rows), 3),
    }


def one_request(client, start: threading.Barrier, args, t0: list[float]) -> Outcome:
    start.wait()
    try:
        job = client.submit(
            prompt=PROMPT,
            k=args.k,
            budget_s=args.budget,
            max_new_tokens=args.max_new_tokens,
            seed=0,
            api_name="/generate",
        )
        result = job.result(timeout=args.timeout)
    except Exception as err:  # noqa: BLE001 - every failure is sorted: the busy error or lost
        kind = "refused" if BUSY_TEXT in str(err) else "lost"
        return Outcome(kind, time.perf_counter() - t0[0], f"{type(err).__name__}: {err}")
    elapsed = time.perf_counter() - t0[0]
    if result.get("status") != "done" or not result.get("candidates"):
        return Outcome("lost", elapsed, f"unexpected result: {str(result)[:200]}")
    return Outcome("completed", elapsed)


def percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    array = np.array(values)
    return {
        name: round(float(np.percentile(array, q)), 3)
        for name, q in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))
    }


def build_app(args: argparse.Namespace):
    """(demo, analyzer, hub): the app's page and API on a tiny local model, or on --base-url's server."""
    from app.models import EngineHub, ModelChoice, remote_menu
    from app.service import Pipeline
    from app.serving import Service
    from app.ui import build_demo
    from engine.remote import RemoteSettings
    from static_eval import AnalyzerSettings, StaticAnalyzer

    analyzer = StaticAnalyzer(AnalyzerSettings())
    if args.base_url:
        hub = EngineHub(
            remote_menu(RemoteSettings(args.base_url, args.served_model)), concurrency=args.remote_concurrency
        )
    else:
        hub = EngineHub([ModelChoice("tiny", "tiny:0", None)])
    return build_demo(Service(hub, Pipeline(analyzer=analyzer)), queue_size=args.queue_size), analyzer, hub


def send_at_once(url: str, args: argparse.Namespace) -> tuple[list[Outcome], float, dict | None]:
    """One warm-up, then --requests clients released together; (outcomes, wall seconds, the app's overhead with
    --base-url)."""
    from gradio_client import Client

    Client(url, verbose=False).predict(prompt=PROMPT, k=1, budget_s=1.0, api_name="/generate")  # warm up
    clients = [Client(url, verbose=False) for _ in range(args.requests)]
    start, t0 = threading.Barrier(args.requests + 1), [0.0]
    with ThreadPoolExecutor(args.requests) as pool:
        futures = [pool.submit(one_request, c, start, args, t0) for c in clients]
        t0[0] = time.perf_counter()
        start.wait()
        outcomes = [f.result() for f in futures]
    wall = time.perf_counter() - t0[0]
    overhead = app_overhead(clients[0], args.overhead_prompts) if args.base_url else None
    return outcomes, wall, overhead


def print_report(summary: dict, by_kind: dict[str, list[Outcome]]) -> None:
    """The table of outcomes and latencies; with --base-url, the app's time on top of the server's."""
    print(f"{'outcome':<10} {'count':>5} {'p50 s':>8} {'p90 s':>8} {'p99 s':>8} {'max s':>8}")
    for kind, key in (("completed", "latency_completed_s"), ("refused", "latency_refused_s")):
        lat = summary[key]
        cells = " ".join(f"{'-' if lat[q] is None else lat[q]:>8}" for q in ("p50", "p90", "p99", "max"))
        print(f"{kind:<10} {len(by_kind[kind]):>5} {cells}")
    print(f"{'lost':<10} {len(by_kind['lost']):>5}")
    overhead = summary["app_overhead"]
    if overhead:
        print(
            f"app time on top of the server: {overhead['app_s']:.2f} s over {overhead['server_s']:.2f} s of server "
            f"time ({100 * (overhead['app_share_of_server'] or 0):.1f}%) for {overhead['prompts']} k=8 prompts"
        )


def main(argv=None) -> int:
    args = parse_args(argv)
    demo, analyzer, hub = build_app(args)
    url = launch_in_process(demo)
    try:
        outcomes, wall, overhead = send_at_once(url, args)
    finally:
        demo.close()
        analyzer.close()

    by_kind = {kind: [o for o in outcomes if o.kind == kind] for kind in ("completed", "refused", "lost")}
    summary = {
        "requests": args.requests,
        "queue_size": args.queue_size,
        "k": args.k,
        "budget_s": args.budget,
        "completed": len(by_kind["completed"]),
        "refused_busy": len(by_kind["refused"]),
        "lost": len(by_kind["lost"]),
        "wall_s": round(wall, 3),
        "latency_completed_s": percentiles([o.seconds for o in by_kind["completed"]]),
        "latency_refused_s": percentiles([o.seconds for o in by_kind["refused"]]),
        "lost_details": [o.detail for o in by_kind["lost"]],
        "backend": "openai" if args.base_url else "local tiny:0",
        "remote_concurrency": hub.concurrency,
        "app_overhead": overhead,
    }
    print_report(summary, by_kind)
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return 0 if not by_kind["lost"] else 1


if __name__ == "__main__":
    sys.exit(main())
