"""Entry point: command-line options, then the app's objects built once (engines load lazily), then launch."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

DRAFTERS = ("none", "model", "prompt", "sibling", "auto")  # engine.DRAFTER_CHOICES, without importing torch for --help


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Ranked code drafts: a local code-generation assistant (Gradio UI "
                                                 "and API). Models load on first use.")
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


def build(args: argparse.Namespace):
    """(demo, analyzer): every long-lived object of the app, made here once and passed in."""
    from static_eval import AnalyzerSettings, StaticAnalyzer

    from app.models import EngineHub, menu
    from app.service import Limits, Pipeline
    from app.ui import build_demo
    from engine import EngineSettings

    limits = Limits(max_k=args.max_k, max_budget_s=args.max_budget)
    hub = EngineHub(menu(args.model, args.draft), args.cache_dir, EngineSettings(drafter=args.drafter),
                    dtype=args.dtype)
    analyzer = StaticAnalyzer(AnalyzerSettings(lint=not args.no_lint))
    demo = build_demo(hub, Pipeline(analyzer=analyzer), limits, queue_size=args.queue_size)
    return demo, analyzer


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")  # model preparation steps
    logging.getLogger("httpx").setLevel(logging.WARNING)  # gradio's own start-up requests
    demo, analyzer = build(args)
    try:
        demo.launch(server_name=args.host, server_port=args.port, share=args.share)
    finally:
        analyzer.close()


if __name__ == "__main__":
    main()
