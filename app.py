"""Entry point: command-line options, then the app's objects built once, the default model loading in the background,
then launch."""
from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path

DRAFTERS = ("none", "model", "prompt", "sibling", "auto")  # engine.DRAFTER_CHOICES, without importing torch for --help


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Ranked code drafts: a local code-generation assistant (Gradio UI "
                                                 "and API). The default model loads in the background at start-up.")
    parser.add_argument("--model", help="target model: bundled:qwen2.5-coder-1.5b, bundled:qwen2.5-coder-0.5b, a "
                                        "Hugging Face id or a local directory; offered first in the model menu")
    parser.add_argument("--draft", help="draft model for --model (same tokenizer family)")
    parser.add_argument("--drafter", choices=DRAFTERS, default="auto",
                        help="how the engine drafts (default: auto, a cost model picks per step)")
    parser.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"), default="auto",
                        help="model weights (default: auto, bf16 on a GPU or a CPU with native bf16, else fp32)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1, this "
                                                            "machine only)")
    parser.add_argument("--port", type=int, default=None, help="port (default: 7860 or the next free one)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="where bundled models are prepared (default: $RANKED_DRAFTS_CACHE or ~/.cache/ranked-drafts)")
    parser.add_argument("--max-k", type=int, default=16, help="largest k a request may ask for (1..32, default 16)")
    parser.add_argument("--max-budget", type=float, default=120.0,
                        help="largest time budget in seconds a request may ask for (default 120)")
    parser.add_argument("--queue-size", type=int, default=8,
                        help="requests that may wait for the engine before new ones are refused (default 8)")
    parser.add_argument("--no-lint", action="store_true", help="static analysis without pylint (syntax only)")
    parser.add_argument("--share", action="store_true", help="create a public Gradio share link (off by default)")
    return parser.parse_args(argv)


def check_port(host: str, port: int | None) -> None:
    """Exit with a message in the app's words when --port is taken (Gradio's own error advises launch() arguments)."""
    if port is None:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as err:
            sys.exit(f"error: --port {port} on {host} is not available ({err.strerror}): another program (perhaps "
                     "another instance of this app) is using it. Choose another with --port N, or leave --port out "
                     "to take 7860 or the next free port.")


def build(args: argparse.Namespace):
    """(demo, analyzer, hub): every long-lived object of the app, made here once and passed in."""
    from static_eval import AnalyzerSettings, StaticAnalyzer

    from app.models import EngineHub, menu
    from app.requests import Limits
    from app.service import Pipeline
    from app.ui import build_demo
    from engine import EngineSettings

    limits = Limits(max_k=args.max_k, max_budget_s=args.max_budget)
    hub = EngineHub(menu(args.model, args.draft), args.cache_dir, EngineSettings(drafter=args.drafter),
                    dtype=args.dtype)
    analyzer = StaticAnalyzer(AnalyzerSettings(lint=not args.no_lint))
    demo = build_demo(hub, Pipeline(analyzer=analyzer), limits, queue_size=args.queue_size)
    return demo, analyzer, hub


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")  # model preparation steps
    logging.getLogger("httpx").setLevel(logging.WARNING)  # gradio's own start-up requests
    check_port(args.host, args.port)
    demo, analyzer, hub = build(args)
    hub.preload()  # the default model loads while the page is already up; the page shows its state
    try:
        demo.launch(server_name=args.host, server_port=args.port, share=args.share, quiet=True,
                    prevent_thread_lock=True)
        print(f"Ranked code drafts is running at {demo.local_url}"
              + (f" and {demo.share_url}" if demo.share_url else " (this machine only: --host 0.0.0.0 serves "
                 "your network, --share makes a public link)")
              + f"; the API is /generate (see the README). Preparing {hub.default_label!r} in the background.",
              flush=True)
        demo.block_thread()
    finally:
        analyzer.close()


if __name__ == "__main__":
    main()
