"""An editing session replayed against one server, and what it measured: every request of the planned Steps sent in
turn (mode "ring": the plugin's warm-ups before it), each reply tallied per mode, the table of every server and
mode."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from dataclasses import asdict, dataclass, field, replace

import httpx
import numpy as np

from benchmarks.editor_requests import Step, plugin_body, ring_warmup_body
from benchmarks.infill_client import Reply, infill_body, post_infill
from benchmarks.servers import Server


@dataclass
class Tally:
    """One server on one mode: the timed requests in order."""

    replies: list[Reply] = field(default_factory=list)
    warmups: list[Reply] = field(default_factory=list)  # mode "ring": the warm-ups of the ring's updates
    ring_tokens: int = 0  # mode "ring": prompt tokens of the latest warm-up (the ring as the server reads it)
    ring_read: list[int | None] = field(default_factory=list)  # per reply: ring_tokens if the ring was settled

    def add_warmup(self, warm: Reply) -> None:
        """A ring update's warm-up: the ring as the server read it is now its prompt tokens, computed or cached."""
        self.warmups.append(warm)
        self.ring_tokens = (warm.prompt_n or 0) + (warm.cache_n or 0)

    def add_reply(self, reply: Reply, step: Step) -> None:
        self.replies.append(reply)
        self.ring_read.append(self.ring_tokens if step.ring_settled else None)

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


def replay(server: Server, steps: list[Step], args: argparse.Namespace, out) -> Tally:
    """Send the steps one after another (never two at once) and keep every reply."""
    tally = Tally()
    with httpx.Client() as client:
        for number, step in enumerate(steps):
            for ring in step.warmups:
                warm = post_infill(client, server.url, ring_warmup_body(ring, args.plugin), timeout_s=args.timeout)
                tally.add_warmup(warm)
            body = request_body(step, args)
            reply = post_infill(client, server.url, body, timeout_s=args.timeout)
            if reply.contents:  # the line as the plugin shows it: what it sent as typed, then the suggestion
                shown = replace(step, prompt=body["prompt"])
                reply.first_line_right, reply.first_line_similarity = first_line_scores(shown, reply.contents[0])
            tally.add_reply(reply, step)
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


def request_body(step: Step, args: argparse.Namespace) -> dict:
    """The /infill body of `step`: the plugin's own (--plugin), else llama.vim's fields with the asked options."""
    if args.plugin != "none":
        return plugin_body(args.plugin, step, args.plugin_temperature)
    return infill_body(
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


def first_line_scores(step: Step, content: str) -> tuple[bool, float]:
    """(the suggestion's first line completes the cursor line exactly, their edit similarity), compared without
    trailing blanks, as a user accepting the first line sees it."""
    suggested = (step.prompt + content.split("\n")[0]).rstrip()
    real = step.real.rstrip()
    return suggested == real, difflib.SequenceMatcher(None, suggested.strip(), real.strip()).ratio()


def print_table(results: dict, k: int) -> None:
    """One row per server and mode: requests, times, prompt tokens computed and cached, tokens out, errors."""
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
            print(
                f"{server:<7}{mode:<7}{row['requests']:>5}{num(row['first_s'], 9)}{num(row['p50_s'], 8)}"
                f"{num(row['p90_s'], 8)}{row['prompt_tokens_computed']:>10}{row['prompt_tokens_cached']:>8}"
                f"{num(row['cached_percent'], 10, '.1f')}{num(row['mean_tokens_out'], 9, '.1f')}"
                f"{row['errors']:>8}"
            )


def num(value: float | None, width: int, spec: str = ".2f") -> str:
    """A table cell: the number right-aligned, or n/a."""
    return f"{value:>{width}{spec}}" if value is not None else f"{'n/a':>{width}}"


def print_first_lines(results: dict) -> None:
    """Per server and mode: how often the first suggestion's first line was exactly right, and its similarity."""
    for server, modes in results.items():
        for mode, row in modes.items():
            print(
                f"{server:<7}{mode:<7} first line exactly right {row['first_line_exact_percent']}% "
                f"edit similarity {row['first_line_similarity']}"
            )
