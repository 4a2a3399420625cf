"""Entry point: command-line options, then the app's objects built once, the default model loading in the background,
then launch."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.model_checks import CONTINUATION
from app.model_checks import FORMS as MODEL_TEST_FORMS
from app.requests import MAX_K_LIMIT, SINGLE_CHOICES, Limits
from engine.remote import FAN_OUT_CHOICES, INFILL_CHOICES
from engine.settings import DRAFTER_CHOICES, DTYPE_CHOICES, PROMPT_FORMS, WEIGHT_FORMATS

# These imports read no torch (tested): `python app.py --help` answers at once.


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Ranked code drafts: a local code-generation assistant (Gradio UI "
        "and API). The default model loads in the background at start-up."
    )
    for add_group in (_model_options, _server_options, _evidence_options, _editor_options, _remote_options):
        add_group(parser)
    args = parser.parse_args(argv)
    if args.backend == "openai" and not (args.base_url and args.served_model):
        parser.error("--backend openai needs --base-url URL and --served-model NAME")
    if args.api_key_env and not os.environ.get(args.api_key_env):
        parser.error(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    return args


def _model_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the local models and their engine")
    group.add_argument(
        "--model",
        help="target model: bundled:qwen2.5-coder-1.5b, bundled:qwen2.5-coder-0.5b, a "
        "Hugging Face id or a local directory; offered first in the model menu",
    )
    group.add_argument("--draft", help="draft model for --model (same tokenizer family)")
    group.add_argument(
        "--drafter",
        choices=DRAFTER_CHOICES,
        default="auto",
        help="how the engine drafts (default: auto, a cost model picks per step)",
    )
    group.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        default="auto",
        help="model weights (default: auto: on a CPU the dtype of the format timed fastest here at the model's "
        "first start, see --weights; bf16 on a GPU)",
    )
    group.add_argument(
        "--weights",
        choices=WEIGHT_FORMATS,
        default="auto",
        help="weight format of local models' linear layers: auto (default: at a model's first start, a few "
        "seconds time the candidate formats on this CPU and the fastest is kept, cached with the CPU's "
        "description; a user's model stays native), native (as --dtype), int8 "
        "(weight-only, half the bytes of bf16), int4 (4 bits where the weights are 4-bit already, "
        "as the bundled models' Q4_K layers, int8 elsewhere), w8a8 (int8 weights times "
        "activations rounded to 8 bits per call, 7 without AVX-512 VNNI; outlier channels of the "
        "MLP's down projection in floats), int4-dyn (for ARM: the 4-bit codes times activations "
        "rounded to 8 bits per row, torch's KleidiAI kernel), or int4-w8a8 (w8a8, with the 4-bit codes for one-row "
        "calls where the weights are 4-bit already): fewer bytes per step, faster decoding on a "
        "CPU",
    )
    group.add_argument(
        "--prompt-form",
        choices=PROMPT_FORMS,
        default="auto",
        help="how local models read a prompt to continue: chat (the code as the model's own answer "
        "begun, in its chat template, ending at the code block's closing fence), raw (the text "
        "as it is), or auto (default: chat for an instruct model, one whose end-of-sequence "
        "token closes its chat turns, as the bundled models; raw otherwise). Code after the "
        "cursor always uses the model's fill-in-the-middle format",
    )


def _server_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("the server and its limits")
    group.add_argument(
        "--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1, this machine only)"
    )
    group.add_argument("--port", type=int, default=None, help="port (default: 7860 or the next free one)")
    group.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where bundled models are prepared (default: $RANKED_DRAFTS_CACHE or ~/.cache/ranked-drafts)",
    )
    group.add_argument(
        "--max-k",
        type=int,
        default=Limits.max_k,
        help=f"largest k a request may ask for (1..{MAX_K_LIMIT}, default {Limits.max_k})",
    )
    group.add_argument(
        "--max-budget",
        type=float,
        default=Limits.max_budget_s,
        help=f"largest time budget in seconds a request may ask for (default {Limits.max_budget_s:g})",
    )
    group.add_argument(
        "--queue-size",
        type=int,
        default=8,
        help="requests that may wait for the engine before new ones are refused (default 8)",
    )
    group.add_argument("--share", action="store_true", help="create a public Gradio share link (off by default)")


def _evidence_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("what a candidate is judged by")
    group.add_argument(
        "--no-lint", action="store_true", help="static analysis without pylint and mypy (syntax and empty bodies only)"
    )
    group.add_argument(
        "--no-run-checks",
        action="store_true",
        help="never run the examples in prompts or the user's checks on candidates (by default they "
        "run in a bubblewrap sandbox: no network, no files of yours, limits; where the sandbox "
        "cannot start, nothing runs and the answers say why)",
    )
    group.add_argument(
        "--model-tests",
        nargs="?",
        choices=MODEL_TEST_FORMS,
        const=CONTINUATION,
        help="where a Python prompt or request in words has no examples and no checks are given, have the model "
        "write tests and rank by agreement on them (CodeT; app/model_checks.py). 'continuation' (the default form): "
        "each row goes on past its own code into one assert line in the same batch (engine/tails.py), measured on "
        "HumanEval without its examples at +5.4 points over greedy (+6.1 over the ranking alone) for 1.2x a k=8 "
        "request's time; 'chat': the model is asked for them in words, +6.1 over greedy for about 18 s. Off unless "
        "given",
    )
    group.add_argument(
        "--no-read-examples",
        action="store_true",
        help="where a Python docstring calls its function more often than the patterns read as examples, do not "
        "ask the model to read them (by default it does, one greedy answer, and keeps an example only where the "
        "prompt states its call and then its value; app/model_examples.py)",
    )
    group.add_argument(
        "--no-settle",
        action="store_true",
        help="let every row of a Python request of several rows grow to its own end (by default, once the greedy row "
        "has ended, the rows still growing stop where two finished rows pass every check the request carries, or, in "
        "a request in words that carries none, where more than half of the rows have ended: app/settled.py; on "
        "HumanEval 25%% fewer steps, the first draft 79.3%% against 78.0%%)",
    )
    group.add_argument(
        "--no-stated-checks",
        action="store_true",
        help="where a request carries no example, do not rank by the checks the answers state themselves (by "
        "default each Python or JavaScript answer's asserts and commented example prints run, sandboxed, on every "
        "other answer and the ranking takes their dual agreement after the user's checks; app/stated.py)",
    )


def _editor_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("editors' requests")
    group.add_argument(
        "--no-moved-reuse",
        action="store_true",
        help="an editor's window that moved is read again after what it shares with a cached one from the start (by "
        "default the cached lines it kept are reused where they land, keys moved, as llama-server's --cache-reuse)",
    )
    group.add_argument(
        "--no-token-healing",
        action="store_true",
        help="a middle typed into a word is read as typed (by default its last token, or up to three of a word read "
        "as several, is backed over and the first generated token must finish it)",
    )
    group.add_argument(
        "--infill-single",
        choices=SINGLE_CHOICES,
        default="greedy",
        help="what an /infill request that asks for one suggestion without a temperature (llama.vim's "
        "default) gets: greedy (default) or ranked (the best of 4 sampled middles)",
    )


def _remote_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("candidates from a serving engine (vLLM, SGLang, llama-server)")
    group.add_argument(
        "--backend",
        choices=("local", "openai"),
        default="local",
        help="local: this app's own engine (default); openai: an OpenAI-compatible /v1/completions "
        "server at --base-url",
    )
    group.add_argument("--base-url", help="the server's OpenAI base URL, e.g. http://127.0.0.1:8080/v1")
    group.add_argument("--served-model", help="the model name the server serves (sent as `model`)")
    group.add_argument("--api-key-env", help="name of the environment variable holding the server's API key")
    group.add_argument(
        "--fan-out",
        choices=FAN_OUT_CHOICES,
        default="n",
        help="n: one request with n=k (default); requests: k requests of n=1 (servers without n)",
    )
    group.add_argument(
        "--remote-infill",
        choices=INFILL_CHOICES,
        default="suffix",
        help="how middles (code after the cursor) are asked for: suffix (OpenAI's `suffix` on "
        "/v1/completions, default: SGLang, vLLM refuses it) or infill (llama.cpp's /infill at the "
        "server's root: llama-server)",
    )
    group.add_argument(
        "--remote-concurrency",
        type=int,
        default=4,
        help="requests the app runs at once against the server (default 4; the server batches them)",
    )


def check_port(host: str, port: int | None) -> None:
    """Exit with a message in the app's words when --port is taken (Gradio's own error advises launch() arguments)."""
    if port is None:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as err:
            sys.exit(
                f"error: --port {port} on {host} is not available ({err.strerror}): another program (perhaps "
                "another instance of this app) is using it. Choose another with --port N, or leave --port out "
                "to take 7860 or the next free port."
            )


@dataclass(frozen=True)
class Built:
    """Every long-lived object of the app, made once by `build` and passed in where used."""

    demo: Any  # the Gradio Blocks: the page and Gradio's API
    analyzer: Any  # static_eval.StaticAnalyzer (its pylint and mypy workers are closed at exit)
    service: Any  # app.serving.Service: the models in the menu (loaded on first use), the pipeline, the limits


def build(args: argparse.Namespace) -> Built:
    """The app's objects from the command line's options (the heavy imports happen here, not at `--help`)."""
    from app.model_checks import model_tests
    from app.model_examples import ExampleReaderSettings
    from app.models import EngineHub, menu, remote_menu
    from app.service import Pipeline
    from app.serving import Service
    from app.ui import build_demo
    from checks import CheckRunner
    from engine import EngineSettings
    from static_eval import AnalyzerSettings, StaticAnalyzer

    limits = Limits(max_k=args.max_k, max_budget_s=args.max_budget)
    if args.backend == "openai":
        from engine.remote import RemoteSettings

        remote = RemoteSettings(
            args.base_url,
            args.served_model,
            os.environ.get(args.api_key_env) if args.api_key_env else None,
            args.fan_out,
            infill=args.remote_infill,
        )
        hub = EngineHub(remote_menu(remote), concurrency=args.remote_concurrency)
    else:
        hub = EngineHub(
            menu(args.model, args.draft),
            args.cache_dir,
            EngineSettings(
                drafter=args.drafter,
                prompt_form=args.prompt_form,
                token_healing=not args.no_token_healing,
                moved_reuse=not args.no_moved_reuse,
            ),
            dtype=args.dtype,
            weights=args.weights,
        )
    analyzer = StaticAnalyzer(AnalyzerSettings(lint=not args.no_lint))
    pipeline = Pipeline(
        analyzer=analyzer,
        checker=None if args.no_run_checks else CheckRunner.create(),
        model_tests=model_tests(args.model_tests),
        example_reader=None if args.no_read_examples else ExampleReaderSettings(),
        stated_checks=not args.no_stated_checks,
        settle=not args.no_settle,
    )
    service = Service(hub, pipeline, limits)
    return Built(build_demo(service, queue_size=args.queue_size), analyzer, service)


def protocol_mounter(built: Built, infill_single: str):
    """A function that mounts the peers' protocols on the launched page's own server: OpenAI's completions and chat,
    llama.cpp's /infill (llama.vim, llama.vscode) and Ollama's API (Continue, Twinny, Zed). Their modules are
    imported here, before the launch, so that an import error stops the app before it serves anything."""
    from app.chat_api import Chat
    from app.infill_api import Infill
    from app.ollama_api import Ollama
    from app.openai_api import Completions
    from app.routes import mount_protocols

    protocols = [
        Completions(),  # POST /v1/completions, GET /v1/models
        Chat(),  # POST /v1/chat/completions: requests in words
        Infill(single=infill_single),  # POST /infill
        Ollama(),  # /api/generate, /api/tags, /api/show, /api/version
    ]

    def mount() -> None:
        mount_protocols(built.demo, built.service, protocols)

    return mount


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")  # model preparation steps
    logging.getLogger("httpx").setLevel(logging.WARNING)  # gradio's own start-up requests
    check_port(args.host, args.port)
    built = build(args)
    mount_protocols = protocol_mounter(built, args.infill_single)
    built.service.hub.preload()  # the default model loads while the page is already up; the page shows its state
    try:
        built.demo.launch(
            server_name=args.host, server_port=args.port, share=args.share, quiet=True, prevent_thread_lock=True
        )
        mount_protocols()
        print(_started_line(built), flush=True)
        built.demo.block_thread()
    finally:
        built.analyzer.close()


def _started_line(built: Built) -> str:
    """What the console says once the server is up."""
    demo = built.demo
    where = (
        f" and {demo.share_url}"
        if demo.share_url
        else " (this machine only: --host 0.0.0.0 serves your network, --share makes a public link)"
    )
    return (
        f"Ranked code drafts is running at {demo.local_url}{where}; APIs: Gradio /generate, OpenAI-style "
        "/v1/completions, llama.cpp-style /infill and Ollama-style /api/generate (see the README). "
        f"Preparing {built.service.hub.default_label!r} in the background."
    )


if __name__ == "__main__":
    main()
