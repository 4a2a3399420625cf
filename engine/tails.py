"""A row's tail (GenerationRequest.tail): a row that ends by itself goes on, in the same batch, past its code into
one more line after a text the request gives (`\\n\\n\\nassert f(`: a test of the row's own, written by the model right
after the code it tests, for the price of a few batched steps instead of a second request that reads the prompt and
the code again).

How, exactly: the row's cache is cut back to its code (trailing blanks and whatever a stop rule cut dropped), the
tail's text is tokenized and read as a draft that is taken whole in the next round (its positions get the target's
distributions like any draft's; only the acceptance test is skipped), and the token after it is the target's sample
there, as any bonus token. The row's own text, tokens and finish stay as they were; the line goes to Candidate.tail.
The written line ends at its newline (TAIL_TOKENS at most).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.speculation.drafters import Draft
from engine.text.stopping import RowState, Tail

TAIL_READ_TOKENS = 32  # a tail's text (with the row's own trailing remainder) is read only if it is this short


def start_tail(row: RowState, tail: str, cached: int, decode: Callable, encode: Callable) -> Tail | None:
    """The tail a row that ended by itself begins, or None (an empty row, one whose first token is not its code's, or a
    text too long to read): it goes on from the row's longest run of cached tokens that its code (its text without
    trailing blanks) begins with, and reads the rest of the code and `tail`. `cached`: the row's tokens its cache
    holds; decode/encode: the row's tokens to its text, a text to tokens."""
    code = row.text.rstrip()
    if not code:
        return None
    kept = min(len(row.token_ids), cached)
    while kept > 0 and not code.startswith(decode(row.token_ids[:kept])):
        kept -= 1
    if not kept:  # not even its first token is its code's (a healed first token): nothing to go on from
        return None
    forced = encode(code[len(decode(row.token_ids[:kept])) :] + tail)
    if not forced or len(forced) > TAIL_READ_TOKENS:
        return None
    return Tail(kept=kept, ids=forced[:1], read=len(forced), queue=forced[1:])


def forced_draft(rows: list[RowState], active: list[int], device: torch.device) -> Draft | None:
    """The draft of the tails' texts still to read ([B, K]: the active rows in batch order; rows with none propose
    nothing), or None where no row has one."""
    queues = [rows[r].tail.queue if rows[r].tail is not None else [] for r in active]
    width = max((len(q) for q in queues), default=0)
    if not width:
        return None
    tokens = torch.zeros(len(active), width, dtype=torch.long, device=device)
    for b, queue in enumerate(queues):
        tokens[b, : len(queue)] = torch.tensor(queue, dtype=torch.long)
    lengths = torch.tensor([len(q) for q in queues], dtype=torch.long, device=device)
    return Draft(tokens, lengths)
