"""The outrun rule on committed samples (issue 46, item 4): what cutting a row that runs far past its finished
siblings would save in steps, and what it does to the ranked first draft. Measured, it did not pay (docs/CPU.md:
1-2 of 164 first drafts lost for 8-21% fewer steps), so the engine does not cut; the rule lives here.

Rows are replayed as if they grew one token a step together (the engine's rows advance at least a token a round):
at step t, the rows that ended by themselves at or before t are the finished ones, and a row still growing when t
reaches the rule's limit is cut to its first t tokens, finish reason "length" (a cut text, as static_eval reads it).
The rows are those a greedy_first request gets (the greedy answer as row 0), which is spared unless --cut-greedy. Writes the cut sample file; score both files with eval_humaneval's
shipped scoring to compare the ranked first draft:

    python -m benchmarks.eval_outrun benchmarks/data/humaneval_shipped_qwen2.5-coder-1.5b_k8_t0.8.jsonl.gz \\
        --out /tmp/outrun.jsonl.gz --quorum 0.5 --factor 1.5
    python -m benchmarks.eval_humaneval --static --greedy-row --checks --rankers gsc/ngram_overlap/1-4/bin \\
        --samples /tmp/outrun.jsonl.gz

With --settled N the rule is the app's (app/settled.py) instead: once the greedy row has ended and N rows that ended
by themselves pass every example of the prompt (run confined here), every row still growing is cut there.

Steps: the longest row's tokens per problem, summed (what a request waits for, to first order: a step of a batch
of 1-2 rows costs nearly what one of 8 does on a CPU, benchmarks/bench_roofline.py). Prints a line per setting and,
as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from dataclasses import dataclass

from benchmarks.eval_humaneval import read_samples, with_greedy_row
from engine.types import FINISH_LENGTH, FINISH_STOP


@dataclass(frozen=True)
class OutrunRule:
    """Once `quorum` of the k rows have ended by themselves, a row still growing at `factor` times the longest of
    them (in tokens) is cut there."""

    quorum: float = 0.5  # the share of the k rows that must have ended by themselves (FINISH_STOP)
    factor: float = 1.5  # times the longest of those rows' tokens

    def limit(self, finished: list[int], k: int) -> int | None:
        """The tokens at which a growing row is cut, given the token counts of the rows that ended by themselves;
        None while fewer than the quorum have (and always for a single row)."""
        if k < 2 or not finished or len(finished) < math.ceil(self.quorum * k):
            return None
        return math.ceil(self.factor * max(finished))


def cut_lengths(lengths: list[int], ended: list[bool], rule: OutrunRule, spared: int | None = None) -> list[int]:
    """Each row's tokens once the rule has cut it (rows grow a token a step together); `ended`: whether a row ended
    by itself (its length is where it did); the row `spared` (the greedy one) is never cut."""
    k, kept = len(lengths), list(lengths)
    for step in range(1, max(lengths, default=0) + 1):
        finished = [n for n, by_itself in zip(lengths, ended) if by_itself and n <= step]
        limit = rule.limit(finished, k)
        if limit is None or step < limit:
            continue
        return [n if i == spared else min(n, step) for i, n in enumerate(lengths)]
    return kept


def cut_record(record: dict, rule: OutrunRule, spare_greedy: bool) -> tuple[dict, int, int, int]:
    """(the record with its rows cut, the longest row's tokens before and after, rows cut)."""
    record = with_greedy_row(record)
    rows = record["candidates"]
    lengths = [len(c["token_ids"]) for c in rows]
    spared = 0 if spare_greedy and record.get("greedy") else None
    kept = cut_lengths(lengths, [c["finish_reason"] == FINISH_STOP for c in rows], rule, spared)
    return _kept(record, lengths, kept)


def _kept(record: dict, lengths: list[int], kept: list[int]) -> tuple[dict, int, int, int]:
    """cut_record's tuple for a record (its greedy row as row 0) whose rows keep `kept` of their `lengths` tokens."""
    cut = [_cut(c, n) if n < m else c for c, n, m in zip(record["candidates"], kept, lengths)]
    changed = sum(n < m for n, m in zip(kept, lengths))
    greedy = {"greedy": cut[0]} if record.get("greedy") else {}  # with_greedy_row made it row 0
    return {**record, "candidates": cut, **greedy}, max(lengths), max(kept), changed


def settled_lengths(lengths: list[int], ended: list[bool], passes: list[bool], enough: int, spared=None) -> list[int]:
    """Each row's tokens under the settled rule: at the first step where `enough` rows have ended by themselves and
    pass every example of the prompt (`passes`), and the row `spared` (the greedy one) has ended, every row still
    growing is cut there."""
    first = lengths[spared] if spared is not None else 0
    for step in range(max(first, 1), max(lengths, default=0) + 1):
        settled = sum(1 for n, by_itself, ok in zip(lengths, ended, passes) if by_itself and ok and n <= step)
        if settled >= enough:
            return [min(n, step) for n in lengths]
    return list(lengths)


def settled_record(record: dict, runner, enough: int, spare_greedy: bool) -> tuple[dict, int, int, int]:
    """cut_record's tuple under the settled rule; the prompt's examples run confined on each row (a prompt without
    examples is never settled)."""
    from benchmarks.eval_humaneval import example_passes
    from checks import checks_for_prompt

    record = with_greedy_row(record)
    rows, examples = record["candidates"], checks_for_prompt(record["prompt"])
    lengths = [len(c["token_ids"]) for c in rows]
    passed = example_passes(runner, record["prompt"], [c["text"] for c in rows], examples) if examples else []
    passes = [bool(examples) and n == len(examples) for n in passed] or [False] * len(rows)
    spared = 0 if spare_greedy and record.get("greedy") else None
    ended = [c["finish_reason"] == FINISH_STOP for c in rows]
    return _kept(record, lengths, settled_lengths(lengths, ended, passes, enough, spared))


def _cut(candidate: dict, tokens: int) -> dict:
    """The candidate's first `tokens` tokens (its text the texts of those tokens), cut ("length")."""
    texts = candidate["token_texts"][:tokens]
    return {
        **candidate,
        "text": "".join(texts),
        "token_ids": candidate["token_ids"][:tokens],
        "logprobs": candidate["logprobs"][:tokens],
        "token_texts": texts,
        "finish_reason": FINISH_LENGTH,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("samples")
    parser.add_argument("--out", help="write the cut samples here (.jsonl.gz)")
    parser.add_argument("--quorum", type=float, default=OutrunRule.quorum)
    parser.add_argument("--factor", type=float, default=OutrunRule.factor)
    parser.add_argument("--sweep", action="store_true", help="also print steps and rows cut for other settings")
    parser.add_argument("--cut-greedy", action="store_true", help="the greedy row may be cut too (spared by default)")
    parser.add_argument(
        "--settled",
        type=int,
        help="instead: once this many rows have ended and pass every example of the prompt, cut the growing rows",
    )
    args = parser.parse_args(argv)
    records = list(read_samples(args.samples).values())
    if args.settled:
        return settled_main(args, records)
    settings = [(args.quorum, args.factor)]
    if args.sweep:
        settings += [(q, f) for q in (0.5, 0.75) for f in (1.25, 1.5, 2.0) if (q, f) != settings[0]]
    table = {}
    for quorum, factor in settings:
        rule = OutrunRule(quorum, factor)
        results = [cut_record(r, rule, not args.cut_greedy) for r in records]
        before, after = sum(r[1] for r in results), sum(r[2] for r in results)
        rows = sum(len(r[0]["candidates"]) for r in results)
        cut = sum(r[3] for r in results)
        table[f"{quorum}/{factor}"] = {"steps_before": before, "steps_after": after, "rows_cut": cut, "rows": rows}
        print(f"quorum {quorum}, factor {factor}: steps {after} of {before} ({after / before:.0%}), {cut} of {rows} "
              f"rows cut")  # fmt: skip
        if args.out and (quorum, factor) == settings[0]:
            with gzip.open(args.out, "wt") as out:
                for record, *_ in results:
                    out.write(json.dumps(record) + "\n")
    result = {"benchmark": "eval_outrun", "samples": args.samples, "settings": table}
    print(json.dumps(result))
    return result


def settled_main(args, records: list[dict]) -> dict:
    """The settled rule's steps and rows cut (and its cut samples with --out)."""
    from checks import CheckRunner

    runner = CheckRunner.create()
    results = [settled_record(r, runner, args.settled, not args.cut_greedy) for r in records]
    before, after = sum(r[1] for r in results), sum(r[2] for r in results)
    rows, cut = sum(len(r[0]["candidates"]) for r in results), sum(r[3] for r in results)
    print(f"settled at {args.settled} rows: steps {after} of {before} ({after / before:.0%}), {cut} of {rows} rows cut")
    if args.out:
        with gzip.open(args.out, "wt") as out:
            for record, *_ in results:
                out.write(json.dumps(record) + "\n")
    result = {"benchmark": "eval_outrun", "samples": args.samples, "settled": args.settled,
              "steps_before": before, "steps_after": after, "rows_cut": cut, "rows": rows}  # fmt: skip
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
