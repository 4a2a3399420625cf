"""Apply today's stopping rules to a sample file's stored tokens (no model needed), writing a corrected file.

Sample files hold every candidate's generated tokens. When a stopping rule was wrong (issue 10: Qwen's
<|endoftext|> did not end a row, so some candidates went on into a new text), the corrected candidate is the
stored tokens cut by the right rules: sampling is keyed by (row, position), so the tokens before the cut are those
the corrected engine draws, and every stop point of the old rules (top-level stop strings) is also a stop point of
the new ones (a top-level function's body ends at any non-blank line at column 0). Only a bf16 run could differ,
where other rows' batch shapes round differently once a row ends sooner.

Example: python -m benchmarks.restop_samples benchmarks/data/humaneval_qwen2.5-coder-1.5b_k8_t0.8.jsonl.gz
Prints what changed and, as its last line, one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from engine.quant.cpu import cpu_description
from engine.text.blocks import BodyEnd
from engine.text.stopping import RowState, StopRules
from engine.types import FINISH_STOP


def restop(candidate: dict, body: BodyEnd, eos_ids: frozenset[int], decode) -> dict:
    """The candidate as today's rules leave it (the same dict shape): tokens cut at the first special token (the
    text is then their decoding), then the text cut where it leaves the function's body (the tokens that lie
    wholly before the cut kept, as the engine does). The stored text is the source otherwise: older rules kept
    the text of a token that a stop string split, but not the token."""
    tokens, logprobs, text = list(candidate["token_ids"]), list(candidate["logprobs"]), candidate["text"]
    finish = candidate["finish_reason"]
    special = next((i for i, token in enumerate(tokens) if token in eos_ids), None)
    if special is not None:
        tokens, logprobs, finish = tokens[:special], logprobs[:special], FINISH_STOP
        text = decode(tokens)
    cut = body.ends_at(text)
    if cut is not None:
        row = RowState(tokens, logprobs, text)
        StopRules.end_row_at(row, cut, decode)
        tokens, logprobs, text, finish = row.token_ids, row.logprobs, row.text, row.finish_reason
    fixed = dict(candidate, text=text, token_ids=tokens, logprobs=logprobs, finish_reason=finish)
    if "token_texts" in candidate:
        fixed["token_texts"] = candidate["token_texts"][: len(tokens)]
    return fixed


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("samples", help="a .jsonl.gz sample file of benchmarks.eval_humaneval")
    parser.add_argument("--out", help="where to write (default: replace the file)")
    parser.add_argument(
        "--tokenizer",
        default="bundled:qwen2.5-coder-0.5b",
        help="a model spec whose tokenizer decodes the tokens (the bundled models share one)",
    )
    args = parser.parse_args(argv)
    from engine import load_any
    from engine.generate import end_of_text_ids

    model, tokenizer = load_any(args.tokenizer, progress=False)
    eos_ids = end_of_text_ids(model, tokenizer)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731 - the engine's own decode
    path = Path(args.samples)
    records = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    counts = {"candidates": 0, "changed": 0, "had_special_token": 0, "greedy_changed": 0}
    for record in records:
        body = BodyEnd.of(record["prompt"])  # once per prompt, for its k candidates and the greedy one
        for i, candidate in enumerate(record["candidates"]):
            fixed = restop(candidate, body, eos_ids, decode)
            counts["candidates"] += 1
            counts["had_special_token"] += any(t in eos_ids for t in candidate["token_ids"])
            if fixed["text"] != candidate["text"]:
                counts["changed"] += 1
                if counts["changed"] <= 5:
                    print(
                        f"{record['task_id']} #{i}: ...{candidate['text'][-70:]!r}\n    -> ...{fixed['text'][-70:]!r}"
                    )
            record["candidates"][i] = fixed
        if record.get("greedy"):
            fixed = restop(record["greedy"], body, eos_ids, decode)
            counts["greedy_changed"] += fixed["text"] != record["greedy"]["text"]
            record["greedy"] = fixed
        record["restopped"] = "engine/text/blocks.py body end + every special token ends a row (issue 10)"
    out = Path(args.out) if args.out else path
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    summary = {"benchmark": "restop_samples", "samples": str(path), "out": str(out), **counts}
    summary["cpu"] = cpu_description()  # the CPU beside every figure
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
