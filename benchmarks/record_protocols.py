"""Recordings of the peers' protocols, for a change that must not change what they answer (issue 48, part 4).

`python -m benchmarks.record_protocols --out F` starts the app on the bundled 0.5B in a fixed format and without a
drafter (no timing decides either: with `--drafter auto` the timed choice of drafter changes the verify pass's shapes
and so a greedy text's last bits, and two runs of the same code differed in 7 of 16 answers), sends a fixed list of
requests through each protocol (OpenAI's completions and chat, llama.cpp's /infill, Ollama's generate, tags and show,
and bad requests of each), and writes every answer with its status code, clocks and ids masked. `--compare F` (with or
without --out) sends the same requests and says, request by request, whether the answer is byte for byte the one
recorded (clocks and ids aside). Greedy requests and seeded samples only, and a budget no request reaches, so that the
same code on the same machine answers the same; run it on a quiet machine (analyses cut by their own time limits under
load change an answer's findings). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import httpx

from benchmarks.servers import start_app

MODEL = "qwen2.5-coder-0.5b"
APP_ARGS = "--dtype bfloat16 --weights int4-w8a8 --drafter none"  # auto (format, drafter) decides by timings
CLOCKS = re.compile(r"(_s$|_ms$|duration|created|^id$|^t_|timings|elapsed|seconds|per_second|_at$)", re.IGNORECASE)
MASK = "<masked>"
FIB = 'def fib(n):\n    """Return the n-th Fibonacci number: fib(0) == 0, fib(1) == 1.\n    >>> fib(10)\n    55\n    """\n'
JS = "// the largest of an array of numbers\nfunction maxOf(values) {\n"
WORDS = "Write a Python function that checks whether a string is a valid IPv4 address."
SEEDED = {"temperature": 0.8, "seed": 7}

# (name, method, path, body): the requests, in order
REQUESTS: list[tuple[str, str, str, dict | None]] = [
    ("completions greedy", "POST", "/v1/completions", {"prompt": FIB, "max_tokens": 64, "temperature": 0}),
    ("completions n=3", "POST", "/v1/completions", {"prompt": FIB, "max_tokens": 64, "n": 3, **SEEDED}),
    ("completions js", "POST", "/v1/completions", {"prompt": JS, "max_tokens": 48, "temperature": 0}),
    ("completions bad n", "POST", "/v1/completions", {"prompt": FIB, "n": 0}),
    ("completions bad language", "POST", "/v1/completions", {"prompt": FIB, "language": "cobol"}),
    (
        "chat greedy",
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": WORDS}], "max_tokens": 160, "temperature": 0},
    ),
    (
        "chat n=2",
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": WORDS}], "max_tokens": 160, "n": 2, **SEEDED},
    ),
    ("chat bad messages", "POST", "/v1/chat/completions", {"messages": []}),
    (
        "infill llama.vim",
        "POST",
        "/infill",
        {
            "input_prefix": "def area(width, height):\n",
            "input_suffix": "\n\nprint(area(2, 3))\n",
            "input_extra": [],
            "prompt": "    ",
            "n_predict": 32,
            "n_indent": 4,
            "top_k": 40,
            "top_p": 0.9,
            "samplers": ["top_k", "top_p", "infill"],
            "stream": False,
            "cache_prompt": True,
            "t_max_prompt_ms": 500,
            "t_max_predict_ms": 100000,
        },
    ),
    ("infill bad n_predict", "POST", "/infill", {"input_prefix": "x = ", "input_suffix": "", "n_predict": -5}),
    (
        "ollama generate",
        "POST",
        "/api/generate",
        {"model": MODEL, "prompt": FIB, "stream": False, "options": {"temperature": 0, "num_predict": 48}},
    ),
    (
        "ollama generate suffix",
        "POST",
        "/api/generate",
        {
            "model": MODEL,
            "prompt": "def square(x):\n    ",
            "suffix": "\n\nprint(square(3))\n",
            "stream": False,
            "options": {"temperature": 0, "num_predict": 32},
        },
    ),
    ("ollama bad options", "POST", "/api/generate", {"model": MODEL, "prompt": FIB, "options": {"temperature": -1}}),
    ("ollama tags", "GET", "/api/tags", None),
    ("ollama show", "POST", "/api/show", {"model": MODEL}),
    ("models", "GET", "/v1/models", None),
]


def masked(value):
    """`value` with every clock, date and id replaced by MASK (keys named like one), recursively."""
    if isinstance(value, dict):
        return {key: MASK if CLOCKS.search(key) else masked(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [masked(inner) for inner in value]
    return value


def answer(client: httpx.Client, method: str, path: str, body: dict | None) -> dict:
    """One request's status and body (JSON where it is JSON), masked."""
    reply = client.request(method, path, json=body)
    try:
        content = masked(reply.json())
    except ValueError:
        content = reply.text
    return {"status": reply.status_code, "body": content}


def record(base_url: str, timeout_s: float) -> dict[str, dict]:
    """Every request's masked answer, by name."""
    with httpx.Client(base_url=base_url, timeout=timeout_s) as client:
        return {name: answer(client, method, path, body) for name, method, path, body in REQUESTS}


def compare(recorded: dict[str, dict], now: dict[str, dict]) -> list[tuple[str, bool]]:
    """(name, the same byte for byte as its JSON) for each request."""
    dump = lambda value: json.dumps(value, sort_keys=True)  # noqa: E731
    return [(name, dump(recorded.get(name)) == dump(now[name])) for name in now]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the answers here (JSON)")
    parser.add_argument("--compare", help="compare the answers with these recordings")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for one answer")
    parser.add_argument("--log-dir", help="the app's log (default: a temporary directory)")
    args = parser.parse_args(argv)
    if not (args.out or args.compare):
        parser.error("give --out, --compare or both")
    server = start_app(MODEL, app_args=APP_ARGS, log_dir=args.log_dir)
    try:
        now = record(server.url, args.timeout)
    finally:
        server.stop()
    if args.out:
        with open(args.out, "w") as out:
            json.dump(now, out, indent=1, sort_keys=True)
        print(f"{len(now)} answers recorded in {args.out}")
    if not args.compare:
        print(json.dumps({"recorded": len(now), "out": args.out}))
        return 0
    with open(args.compare) as recorded_file:
        outcome = compare(json.load(recorded_file), now)
    print(f"{'request':28} same")
    for name, same in outcome:
        print(f"{name:28} {'yes' if same else 'NO'}")
    differing = [name for name, same in outcome if not same]
    print(json.dumps({"requests": len(outcome), "same": len(outcome) - len(differing), "differing": differing}))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
