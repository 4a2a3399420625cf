"""llama.vim's ring of extra context as benchmarks/editor_ring.py replays it: the plugin's rules, one by one."""

import random

from benchmarks import editor_ring as ring_rules
from benchmarks.editor_ring import Chunk, Ring, chunk_similarity, replay_ring
from benchmarks.editor_session import as_written


def numbered(name: str, count: int) -> list[str]:
    return [f"{name}_{i} = compute_{name}({i})" for i in range(count)]


def test_similarity_is_the_plugins_shared_words_over_all_words():
    assert chunk_similarity(("a b c",), ("a b c",)) == 1.0
    assert chunk_similarity(("a b",), ("c d",)) == 0.0
    assert chunk_similarity(("a b",), ("a x",)) == 2 * 1 / 4  # one of the second's two words is in the first
    assert chunk_similarity(("x.y(z)",), ("x y z",)) == 1.0  # split at non-word characters, as Vim's \W
    assert chunk_similarity((), ()) == 1.0


def test_a_long_text_gives_33_consecutive_lines_and_a_short_one_itself():
    ring = Ring(random.Random(0))
    text = numbered("a", 200)
    ring.pick(text, "a.py", evict=True)
    chunk = ring.queued[0].lines
    assert len(chunk) == ring_rules.RING_CHUNK_LINES // 2 + 1
    start = text.index(chunk[0])
    assert list(chunk) == text[start : start + len(chunk)]
    ring.pick(numbered("b", 10), "b.py", evict=True)
    assert ring.queued[1].lines == tuple(numbered("b", 10))
    ring.pick(["one", "two"], "c.py", evict=True)  # under 3 lines: nothing
    assert len(ring.queued) == 2


def test_known_chunks_are_not_queued_twice_and_updates_move_them_in_order():
    ring = Ring(random.Random(0))
    ring.pick(numbered("b", 10), "b.py", evict=True)
    ring.pick(numbered("b", 10), "b.py", evict=True)
    assert len(ring.queued) == 1
    assert ring.update() and ring.chunks[0].filename == "b.py" and not ring.queued
    ring.pick(numbered("b", 10), "b.py", evict=True)  # already in the ring
    assert not ring.queued and not ring.update()


def test_a_similar_chunk_evicts_or_is_refused_but_the_first_of_each_list_stays():
    ring = Ring(random.Random(0))
    for name in ("a", "b"):
        ring.pick(numbered(name, 10), f"{name}.py", evict=True)
    near_b = numbered("b", 10)[:-1] + ["b_9 = compute_b(9)  # changed"]
    ring.pick(near_b, "b.py", evict=False)  # resembles a queued chunk: refused
    assert [c.filename for c in ring.queued] == ["a.py", "b.py"]
    ring.pick(near_b, "b.py", evict=True)  # evicts it
    assert [c.lines for c in ring.queued] == [tuple(numbered("a", 10)), tuple(near_b)]
    near_a = numbered("a", 10)[:-1] + ["a_9 = 0"]
    ring.pick(near_a, "a.py", evict=True)  # the first queued chunk is out of the plugin's loop: both stay
    assert len(ring.queued) == 3


def test_the_queue_and_the_ring_keep_their_bounds():
    ring = Ring(random.Random(0))
    for i in range(ring_rules.QUEUE_CHUNKS + 3):
        ring.pick([f"unique_{i}_{j} = {j}" for j in range(5)], f"f{i}.py", evict=True)
    assert len(ring.queued) == ring_rules.QUEUE_CHUNKS
    assert ring.queued[0].lines[0] == "unique_3_0 = 0"  # the oldest left first
    ring.chunks = [Chunk("x.py", (f"x{i}",)) for i in range(ring_rules.RING_CHUNKS)]
    ring.update()
    assert len(ring.chunks) == ring_rules.RING_CHUNKS and ring.chunks[0].lines == ("x1",)


def test_chunks_like_the_cursors_surroundings_leave_before_a_request():
    lines = numbered("here", 100)
    ring = Ring(random.Random(0))
    ring.chunks = [Chunk("other.py", tuple(numbered("other", 10))), Chunk("here.py", tuple(lines[40:60]))]
    ring.evict_near(lines, 50)
    assert [c.filename for c in ring.chunks] == ["other.py"]


def test_a_replayed_session_sends_warmups_and_a_settled_ring():
    files = {name: [f"v{name}{i} = w{name}{i}" for i in range(600)] for name in ("a", "b", "c")}  # unlike lines
    cursors = [(name, files[name], row) for row in range(100, 500, 40) for name in files]
    visits = replay_ring(cursors, updates_between=2, seed=1)
    assert len(visits) == len(cursors)
    assert visits[0].warmups and visits[0].extra == visits[0].warmups[-1]  # the request carries the warmed ring
    assert all(len(v.warmups) <= 2 for v in visits)
    assert any(v.ring_settled for v in visits[-5:])
    assert all(len(v.extra) <= ring_rules.RING_CHUNKS for v in visits)
    assert {e["filename"] for v in visits for e in v.extra} == set(files)
    assert replay_ring(cursors, updates_between=2, seed=1) == visits  # the same seed, the same session


def test_a_ring_session_picks_from_the_files_as_written_so_no_chunk_holds_a_line_asked():
    lines = [f"    value_{i} = compute({i})" for i in range(300)]
    cursors = [("a.py", lines, row) for row in (100, 160, 220)]
    name, buffer, row = as_written(cursors, 0, 3)
    assert buffer[100] == "    val" and buffer[160] == buffer[220] == ""  # typed so far; not written yet
    assert as_written(cursors, 2, 3)[1][100] == lines[100]  # written by then
    visits = replay_ring([as_written(cursors, i, 3) for i in range(3)], updates_between=2, seed=0)
    for (_, _, asked), visit in zip(cursors, visits):
        assert all(lines[asked] not in chunk["text"] for chunk in visit.extra)
