"""llama.vim's ring of extra context, replayed: which chunks of which files a llama.vim user's requests carry in
`input_extra` as the cursor moves between functions of several files, and the warm-up requests that send each
ring update to the server ahead of the next suggestion (autoload/llama.vim at a1c8e6e, its default g:llama_config).

The rules, as the plugin has them:
- a chunk is at most RING_CHUNK_LINES / 2 + 1 consecutive lines drawn at random from a piece of text (the whole
  piece when it is shorter than RING_CHUNK_LINES - 1 lines; pieces under 3 lines give none); a chunk already in the
  ring or the queue is not queued again; a new chunk evicts (or, where the rule does not evict, is refused by) the
  queued and ring chunks it resembles by more than 0.9 (`s:chunk_sim`: shared words over all words), the first of
  each list excepted, as the plugin's loops leave index 0 out; the queue holds at most 16;
- chunks are picked when the cursor leaves a buffer and enters one (the lines within RING_CHUNK_LINES / 2 of the
  cursor, evicting), and after a suggestion request when the cursor has moved more than 32 lines since the last
  pick (the lines from RING_SCOPE to N_PREFIX above the cursor, and the RING_CHUNK_LINES lines after the local
  suffix; not evicting);
- every `ring_update_ms` while the user is not typing, the first queued chunk moves to the ring (the oldest ring
  chunk leaves a full ring) and a warm-up request (`n_predict` 0) carries the whole ring;
- before each suggestion request, ring chunks resembling a random chunk around the cursor by more than 0.5 leave
  the ring.
What is not replayed: yanks and saves (they pick chunks the same way), the plugin's speculative follow-up request
after a suggestion is shown, wall-clock timers (here a fixed number of ring updates between two requests), and the
rule that buffers with unsaved changes give no chunk on entering or leaving (the replay's user saves before moving
to another file, which picks the same lines around the cursor).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

RING_CHUNKS = 16  # ring_n_chunks
RING_CHUNK_LINES = 64  # ring_chunk_size
RING_SCOPE = 1024  # ring_scope
QUEUE_CHUNKS = 16  # the queue's bound (a constant in the plugin)
N_PREFIX, N_SUFFIX = 256, 64  # n_prefix, n_suffix
PICK_DISTANCE = 32  # lines the cursor moves before a request picks chunks again
# a ring is settled when it is full or holds every chunk picked so far and at least half its most: on three real
# modules the plugin's evictions keep it at 8 to 15 chunks, so "full" (16) is rarely reached
SETTLED_CHUNKS = RING_CHUNKS // 2


def words(lines: tuple[str, ...]) -> list[str]:
    """The words `s:chunk_sim` compares: the text split at runs of non-word characters (Vim's \\W)."""
    return [w for w in re.split(r"[^0-9A-Za-z_]+", "\n".join(lines)) if w]


def chunk_similarity(first: tuple[str, ...], second: tuple[str, ...]) -> float:
    """llama.vim's s:chunk_sim: 2 x (words of `second` found among `first`'s) / (all words of both)."""
    words0, words1 = words(first), words(second)
    if not words0 and not words1:
        return 1.0
    known = set(words0)
    return 2.0 * sum(w in known for w in words1) / (len(words0) + len(words1))


@dataclass(frozen=True)
class Chunk:
    filename: str
    lines: tuple[str, ...]

    def extra(self) -> dict:
        """The chunk as `input_extra` carries it."""
        return {"text": "\n".join(self.lines) + "\n", "filename": self.filename}


@dataclass
class Ring:
    """The plugin's ring and queue of chunks, with its random draws from `rng`."""

    rng: random.Random
    chunks: list[Chunk] = field(default_factory=list)
    queued: list[Chunk] = field(default_factory=list)

    def draw(self, text: list[str]) -> tuple[str, ...]:
        """A random run of RING_CHUNK_LINES / 2 + 1 lines of `text` (Vim's slices include their end)."""
        first = self.rng.randint(0, max(0, len(text) - RING_CHUNK_LINES // 2))
        last = min(first + RING_CHUNK_LINES // 2, len(text))
        return tuple(text[first : last + 1])

    def pick(self, text: list[str], filename: str, evict: bool) -> None:
        """s:pick_chunk: queue a chunk of `text` unless it is known or (without `evict`) resembles a known one."""
        if len(text) < 3:
            return
        lines = tuple(text) if len(text) + 1 < RING_CHUNK_LINES else self.draw(text)
        if any(c.lines == lines for c in self.chunks + self.queued):
            return
        for pool in (self.queued, self.chunks):
            for i in range(len(pool) - 1, 0, -1):
                if chunk_similarity(pool[i].lines, lines) > 0.9:
                    if not evict:
                        return
                    del pool[i]
        if len(self.queued) == QUEUE_CHUNKS:
            del self.queued[0]
        self.queued.append(Chunk(filename, lines))

    def update(self) -> bool:
        """s:ring_update: move the first queued chunk into the ring; False when the queue is empty."""
        if not self.queued:
            return False
        if len(self.chunks) == RING_CHUNKS:
            del self.chunks[0]
        self.chunks.append(self.queued.pop(0))
        return True

    def evict_near(self, lines: list[str], row: int) -> None:
        """Before a suggestion request: drop ring chunks resembling a random chunk around the cursor (row 0-based)."""
        near = self.draw(around_cursor(lines, row))
        for i in range(len(self.chunks) - 1, 0, -1):
            if chunk_similarity(self.chunks[i].lines, near) > 0.5:
                del self.chunks[i]

    def extra(self) -> list[dict]:
        return [c.extra() for c in self.chunks]


def around_cursor(lines: list[str], row: int) -> list[str]:
    """The lines within RING_CHUNK_LINES / 2 of the cursor (row 0-based): what entering or leaving a buffer picks."""
    return lines[max(0, row - RING_CHUNK_LINES // 2) : min(row + RING_CHUNK_LINES // 2 + 1, len(lines))]


def far_chunks(lines: list[str], row: int) -> tuple[list[str], list[str]]:
    """What a request picks after a move of more than PICK_DISTANCE lines: the lines from RING_SCOPE to N_PREFIX
    above the cursor, and the RING_CHUNK_LINES lines after the local suffix (row 0-based)."""
    y, last = row + 1, len(lines)  # the plugin's 1-based line numbers
    above = lines[max(1, y - RING_SCOPE) - 1 : max(1, y - N_PREFIX)]
    below = lines[min(last, y + N_SUFFIX) - 1 : min(last, y + N_SUFFIX + RING_CHUNK_LINES)]
    return above, below


@dataclass(frozen=True)
class Visit:
    """One suggestion request of the replay and what the plugin sends before it."""

    filename: str
    row: int  # the cursor's line, 0-based
    warmups: tuple[tuple[dict, ...], ...]  # the ring sent by each warm-up before the request
    extra: tuple[dict, ...]  # the request's input_extra
    ring_settled: bool  # the ring was full, or held every chunk picked so far (none queued) and SETTLED_CHUNKS


def replay_ring(cursors: list[tuple[str, list[str], int]], *, updates_between: int = 1, seed: int = 0) -> list[Visit]:
    """The ring before each request of a session whose cursor goes through `cursors` ((file name, its lines,
    0-based row) in order), `updates_between` ring updates (each with its warm-up) before every request."""
    ring = Ring(random.Random(seed))
    visits: list[Visit] = []
    last: tuple[str, list[str], int] | None = None
    picked_at = -9999  # the plugin keeps one position for all files
    for name, lines, row in cursors:
        if last is None or last[0] != name:
            if last is not None:
                ring.pick(around_cursor(last[1], last[2]), last[0], evict=True)  # BufLeave
            ring.pick(around_cursor(lines, row), name, evict=True)  # BufEnter
        warmups = tuple(tuple(ring.extra()) for _ in range(updates_between) if ring.update())
        ring.evict_near(lines, row)
        settled = len(ring.chunks) == RING_CHUNKS or (not ring.queued and len(ring.chunks) >= SETTLED_CHUNKS)
        visits.append(Visit(name, row, warmups, tuple(ring.extra()), settled))
        if abs(row + 1 - picked_at) > PICK_DISTANCE:
            above, below = far_chunks(lines, row)
            ring.pick(above, name, evict=False)
            ring.pick(below, name, evict=False)
            picked_at = row + 1
        last = (name, lines, row)
    return visits
