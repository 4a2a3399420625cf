"""Fill-in-the-middle and prompt reuse on tiny models: the FIM layout from the tokenizer, a suffix refused by a model
without FIM, middles that stop before the code after the cursor, and a prefix cache that changes no token."""

from __future__ import annotations

import pytest
import torch

from engine import EDITOR_DEADLINE, ContextFile, Deadline, Engine, EngineSettings, GenerationRequest, InvalidRequest
from engine.kv_cache import RaggedKVCache
from engine.models.tiny import byte_tokenizer, tiny_model
from engine.prefix_cache import PrefixCache
from engine.text.infill import FimFormat, split_fim_prompt
from engine.text.stopping import StopRules, SuffixEcho

PREFIX = "class Store:\n    def __init__(self, path):\n        self.path = path\n\n    def save(self):\n        "
SUFFIX = "\n\n    def load(self):\n        return open(self.path).read()\n"


@pytest.fixture(scope="module")
def fim_tokenizer():
    return byte_tokenizer(fim=True)


@pytest.fixture(scope="module")
def fim_model():
    return tiny_model(0, vocab_size=263)


def fim_engine(model, tokenizer, **settings) -> Engine:
    return Engine(model, tokenizer, None, EngineSettings(drafter="none", **settings))


def test_the_fim_layout_comes_from_the_tokenizer(fim_tokenizer):
    fim = FimFormat.of(fim_tokenizer)
    encode = lambda text: fim_tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    request = GenerationRequest("def f():\n    ret", suffix="b", extra=(ContextFile("x.py", "X = 1\n"),))
    ids = fim.prompt_ids(request, encode)
    text = fim_tokenizer.decode(ids)
    assert text == (
        "<|repo_name|>project\n<|file_sep|>x.py\nX = 1\n<|file_sep|>current_file\n"
        "<|fim_prefix|>def f():\n<|fim_suffix|>b<|fim_middle|>    ret"
    )  # the typed line begins the middle
    marker = fim.prompt_ids(GenerationRequest("<|fim_middle|>", suffix="z"), encode)  # typed text stays text
    assert marker.count(fim.ids["<|fim_middle|>"]) == 1  # only the real marker; the typed one is characters
    assert FimFormat.of(byte_tokenizer()) is None


def test_a_model_without_fim_refuses_a_suffix_and_names_the_model(target, tokenizer):
    engine = Engine(target, tokenizer, None, EngineSettings(drafter="none"))
    with pytest.raises(InvalidRequest, match="has no fill-in-the-middle tokens"):
        engine.generate(GenerationRequest(PREFIX, suffix=SUFFIX, k=1, max_new_tokens=4))


def test_a_prompt_with_fim_markers_is_read_as_prefix_and_suffix():
    assert split_fim_prompt("def f():\n    return 1\n") is None
    prefix, suffix, files = split_fim_prompt("<|fim_prefix|>def f():\n    <|fim_suffix|>\nf()\n<|fim_middle|>")
    assert (prefix, suffix, files) == ("def f():\n    ", "\nf()\n", ())
    prompt = "<|repo_name|>r\n<|file_sep|>a.py\nA = 1\n<|file_sep|>b.py\n<|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>"
    assert split_fim_prompt(prompt) == ("x", "y", (ContextFile("a.py", "A = 1\n"),))
    assert split_fim_prompt("<fim_prefix>p<fim_suffix>s<fim_middle>") == ("p", "s", ())
    assert split_fim_prompt("<|fim_suffix|>s<|fim_prefix|>p<|fim_middle|>") is None  # not a template: text
    assert split_fim_prompt('MARKER = "<|fim_middle|>"\n') is None  # code that names one


def test_a_middle_ends_where_it_repeats_the_code_after_the_cursor():
    echo = SuffixEcho.of(PREFIX, SUFFIX)
    assert echo.line == "def load(self):" and echo.first_is_whole  # only indentation before the cursor
    middle = "with open(self.path, 'w') as f:\n            f.write('x')\n\n    def load(self):\n        return 1\n"
    assert echo.ends_at(middle) == middle.index("\n\n    def load") + 1  # the blank line goes too: the suffix has one
    rules = StopRules.of(GenerationRequest(PREFIX, suffix=SUFFIX), frozenset())  # the engine's and remote's rule
    assert rules.ends_at(middle, final=True) == echo.ends_at(middle)
    assert echo.ends_at("x = 1\n    def load(self)") is None  # an unfinished line may still become another
    assert echo.ends_at("x = 1\n    def load(self):", final=True) == len("x = 1\n")
    assert echo.ends_at("def load(self):\n") == 0
    typed = SuffixEcho.of(PREFIX + "x = ", SUFFIX)  # text before the cursor: the middle's first line
    assert typed.ends_at("def load(self):\n") is None  # finishes the cursor's line, it is not a line
    assert SuffixEcho.of("x = 1\n", "\n\n   \n") is None


def test_a_middle_from_the_engine_has_its_stop_rules_and_reports_its_prompt(fim_model, fim_tokenizer):
    engine = fim_engine(fim_model, fim_tokenizer)
    result = engine.generate(
        GenerationRequest(PREFIX, suffix=SUFFIX, k=3, max_new_tokens=40, temperature=1.0, seed=1, stop=())
    )
    head, _, typed = PREFIX.rpartition("\n")
    fim_text = "<|fim_prefix|>" + head + "\n<|fim_suffix|>" + SUFFIX + "<|fim_middle|>" + typed
    assert result.stats.prompt_tokens == len(fim_tokenizer(fim_text, add_special_tokens=False)["input_ids"])
    echo = SuffixEcho.of(PREFIX, SUFFIX)
    for candidate in result.candidates:
        assert candidate.finish_reason in ("stop", "length")
        assert echo.ends_at(candidate.text, final=True) is None  # no middle runs into the suffix's first line


def seeded(prompt: str, suffix: str = "", **changes) -> GenerationRequest:
    fields = dict(k=3, max_new_tokens=10, temperature=0.9, top_p=0.95, seed=7, stop=(), stop_at_body_end=False)
    return GenerationRequest(prompt, suffix=suffix, **(fields | changes))


@pytest.mark.parametrize("suffix", ["", SUFFIX])
def test_a_cached_prompt_gives_the_same_tokens_and_says_what_it_reused(fim_model, fim_tokenizer, suffix):
    """fp32 with a seed: the tokens of a request are the same whether its prompt comes partly from the prefix cache
    (a previous request that shares its beginning) or is computed whole."""
    fresh = fim_engine(fim_model, fim_tokenizer, prefix_cache_mb=0)
    warm = fim_engine(fim_model, fim_tokenizer)
    first = warm.generate(seeded(PREFIX, suffix))
    assert first.stats.cached_prompt_tokens == 0
    assert [c.token_ids for c in first.candidates] == [
        c.token_ids for c in fresh.generate(seeded(PREFIX, suffix)).candidates
    ]
    longer = PREFIX + "with open(self.path) as f:"  # typed on the same line
    again = warm.generate(seeded(longer, suffix))
    reference = fresh.generate(seeded(longer, suffix))
    assert [c.token_ids for c in again.candidates] == [c.token_ids for c in reference.candidates]
    if suffix:  # the first had only indentation on the cursor line (kept in the prefix), the second has text,
        # which goes after the middle marker: the whole lines before the cursor are shared
        shared = len(
            fim_tokenizer("<|fim_prefix|>" + PREFIX.rpartition("\n")[0] + "\n", add_special_tokens=False)["input_ids"]
        )
    else:
        shared = len(fim_tokenizer(PREFIX, add_special_tokens=False)["input_ids"])
    assert again.stats.cached_prompt_tokens >= shared - 1  # the old prefix was reused, the rest computed
    assert (
        reference.stats.cached_prompt_tokens == 0
        and reference.stats.prompt_read_tokens == reference.stats.prompt_tokens
    )


def test_a_prompt_read_in_chunks_gives_the_tokens_of_one_read(fim_model, fim_tokenizer):
    whole = fim_engine(fim_model, fim_tokenizer, prefix_cache_mb=0)
    chunked = fim_engine(fim_model, fim_tokenizer, prefix_cache_mb=0, prefill_chunk=7)
    a, b = whole.generate(seeded(PREFIX)), chunked.generate(seeded(PREFIX))
    assert [c.token_ids for c in a.candidates] == [c.token_ids for c in b.candidates]
    chunks = -(-b.stats.prompt_tokens // 7)
    assert b.stats.forward_passes - a.stats.forward_passes == chunks - 1


def test_a_request_cancelled_while_reading_leaves_what_it_read_for_the_next(fim_model, fim_tokenizer):
    engine = fim_engine(fim_model, fim_tokenizer, prefill_chunk=16)
    asked = []

    def stop_after_two_chunks():
        asked.append(1)
        return len(asked) > 2

    cut = engine.generate(seeded(PREFIX * 3), should_stop=stop_after_two_chunks)
    assert all(c.finish_reason == "budget" and not c.token_ids for c in cut.candidates)
    assert cut.stats.prompt_read_tokens == 32 < cut.stats.prompt_tokens
    after = engine.generate(seeded(PREFIX * 3))
    assert after.stats.cached_prompt_tokens == 32


def test_the_prefix_cache_keeps_within_its_bound_least_recently_used_out():
    def cache_of(tokens: int) -> RaggedKVCache:
        cache = RaggedKVCache(1, 1, torch.device("cpu"), capacity=tokens)
        cache.update(torch.randn(1, 2, tokens, 4), torch.randn(1, 2, tokens, 4), 0)
        cache.commit(torch.tensor([tokens]))
        return cache

    per_token = 2 * 2 * 4 * 4  # keys and values, 2 heads of 4 floats
    store = PrefixCache(max_bytes=25 * per_token)
    store.store(list(range(10)), cache_of(10))
    store.store([50 + i for i in range(10)], cache_of(10))
    assert store.longest_prefix(list(range(5)) + [99]) == (5, tuple(range(10)))
    store.store(list(range(12)), cache_of(12))  # extends the first: replaces it
    assert len(store) == 2 and store.nbytes == 22 * per_token
    store.store([90 + i for i in range(10)], cache_of(10))  # over the bound: the least recently used goes
    assert len(store) == 2 and store.longest_prefix([50, 51])[0] == 0
    store.store(list(range(30)), cache_of(30))  # larger than the bound alone: not kept
    assert store.longest_prefix(list(range(30)))[0] == 12
    store.clear()  # a benchmark's next request is read cold
    assert len(store) == 0 and store.nbytes == 0 and store.longest_prefix(list(range(12)))[0] == 0


def test_a_budget_after_the_prompt_starts_once_the_prompt_is_read(fim_model, fim_tokenizer):
    """llama.cpp's t_max_predict_ms: with Deadline(after_prompt=True) the deadline does not cut the prompt's reading."""
    engine = fim_engine(fim_model, fim_tokenizer, prefix_cache_mb=0, prefill_chunk=8)
    counted = engine.generate(seeded(PREFIX, SUFFIX, budget_s=1e-6))
    assert counted.stats.prompt_read_tokens < counted.stats.prompt_tokens  # the budget cut the reading
    after = engine.generate(seeded(PREFIX, SUFFIX, budget_s=1e-6, deadline=Deadline(after_prompt=True)))
    assert after.stats.prompt_read_tokens == after.stats.prompt_tokens
    assert all(c.finish_reason == "budget" for c in after.candidates)  # then the budget ran out


def test_typing_on_a_line_reuses_all_of_the_prompt_before_the_typed_text(fim_model, fim_tokenizer):
    engine = fim_engine(fim_model, fim_tokenizer)
    engine.generate(seeded(PREFIX + "with", SUFFIX))
    typed_more = engine.generate(seeded(PREFIX + "with open(", SUFFIX))
    assert typed_more.stats.cached_prompt_tokens == typed_more.stats.prompt_tokens - len(" open(")  # bytes here


def test_past_the_budget_the_clock_cuts_no_line(fim_model, fim_tokenizer):
    """llama.cpp's t_max_predict_ms as the plugins rely on it: a row is never cut in the middle of a line by the
    clock; past the deadline it goes on until it writes a newline (or ends by its other rules). The tiny model
    writes no newline, so its rows run to their own end where a plain budget cuts them all."""
    engine = fim_engine(fim_model, fim_tokenizer)
    fields = dict(k=6, budget_s=1e-6, deadline=Deadline(after_prompt=True), max_new_tokens=60, stop_at_body_end=False)
    waits = engine.generate(seeded(PREFIX, SUFFIX, **fields | {"deadline": EDITOR_DEADLINE}))
    assert all(c.finish_reason != "budget" or c.text.endswith("\n") for c in waits.candidates)
    assert all(c.finish_reason in ("stop", "length") for c in waits.candidates)
    cut = engine.generate(seeded(PREFIX, SUFFIX, **fields))
    assert all(c.finish_reason == "budget" for c in cut.candidates)


@pytest.mark.parametrize(
    "text, mark, end",
    [("return x", 0, None), ("return x\n", 0, 9), ("a\nb\nc", 2, 4), ("a\nbc", 2, None), ("\n", 0, 1)],
)
def test_a_row_past_the_budget_ends_after_the_first_newline_past_its_mark(text, mark, end):
    from engine.text.stopping import line_end_after

    assert line_end_after(text, mark) == end


def test_n_indent_ends_a_middle_before_a_line_indented_less():
    from engine.text.stopping import IndentEnd

    rule = IndentEnd(8)
    assert rule.ends_at("x = 1\n        y = 2\n    return y\n") == len("x = 1\n        y = 2\n")
    assert rule.ends_at("x = 1\n        y = 2\n    ") is None  # only indentation so far: not judged yet
    assert rule.ends_at("    x = 1\n\n        y\n") is None  # the first line and blank lines do not count


def test_the_local_context_keeps_whole_lines_within_its_tokens():
    from engine.text.infill import files_within, lines_within

    encode = lambda text: list(text.encode())  # one token per byte
    text = "".join(f"line {i}\n" for i in range(10))  # 7 bytes a line
    assert text.endswith(lines_within(text, 21, encode, from_end=True))
    assert len(lines_within(text, 21, encode, from_end=True)) >= 21  # at least the budget's lines
    assert lines_within(text, 20, encode) == "line 0\nline 1\n"
    assert lines_within(text, 1000, encode) == text
    assert lines_within(text, 0, encode, from_end=True) == "" == lines_within(text, -5, encode)
    files = (ContextFile("a.py", "A = 1\n"), ContextFile("b.py", "B = 2\nC = 3\n"))
    assert files_within(files, 1000, encode) == files
    assert files_within(files, len("b.py\nB = 2\nC = 3\n") + 1, encode) == files[1:]  # the nearest the end first
    assert files_within(files, len("b.py\nC = 3\n") + 1, encode) == (ContextFile("b.py", "C = 3\n"),)


def test_a_bounded_prefix_begins_where_the_next_requests_window_begins():
    """The cursor a few lines further down, the editor's window shifted with it: the kept lines begin at the same
    line of the file, so the prefix cache holds all of them up to the old cursor."""
    from engine.text.infill import lines_within

    encode = lambda text: list(text.encode())
    lines = [f"value_{i} = compute({i}, {i * 7 % 13})\n" for i in range(400)]
    starts = []
    for cursor in (300, 303, 306, 310):
        kept = lines_within("".join(lines[cursor - 256 : cursor]), 4800, encode, from_end=True)
        starts.append(lines.index(kept.splitlines(keepends=True)[0]))
    assert len(set(starts)) == 1, starts


def test_a_bounded_prompt_reads_the_end_of_the_prefix_and_the_start_of_the_suffix(fim_tokenizer):
    fim = FimFormat.of(fim_tokenizer)
    encode = lambda text: fim_tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    prefix = "".join(f"p{i} = {i}\n" for i in range(100))
    suffix = "".join(f"s{i} = {i}\n" for i in range(100))
    request = GenerationRequest(prefix, suffix=suffix, context_tokens=160)  # suffix: 160 / 8 - 2 markers
    text = fim_tokenizer.decode(fim.prompt_ids(request, encode))
    head = text.split("<|fim_suffix|>")[0]
    assert head.startswith("<|fim_prefix|>p") and head.endswith("p99 = 99\n") and len(head) < 160 + 2 * 32 * 8
    assert "p99 = 99\n<|fim_suffix|>s0 = 0\ns1 = 1\n" in text
    assert text.endswith("s1 = 1\n<|fim_middle|>")


def test_token_healing_backs_over_the_typed_token_and_the_first_token_finishes_it(fim_model, fim_tokenizer):
    """With a byte tokenizer the only token that begins with the typed byte is that byte itself: healing must then
    give exactly the unhealed greedy middle, from a prompt one token shorter. A sampled request's rows all begin
    with the backed-over text, which their texts leave out."""
    healed, plain = fim_engine(fim_model, fim_tokenizer), fim_engine(fim_model, fim_tokenizer, token_healing=False)
    typed = "class Store:\n    def save(self):\n        ret"
    greedy = GenerationRequest(typed, suffix=SUFFIX, k=1, max_new_tokens=8, temperature=0.0, seed=1, stop=())
    with_healing, without = healed.generate(greedy), plain.generate(greedy)  # the healed token comes on top
    assert with_healing.stats.prompt_tokens == without.stats.prompt_tokens - 1
    assert with_healing.candidates[0].text == without.candidates[0].text
    assert with_healing.candidates[0].token_ids[0] == fim_tokenizer.convert_tokens_to_ids("t")  # the typed "t"
    sampled = healed.generate(GenerationRequest(typed, suffix=SUFFIX, k=4, max_new_tokens=6, seed=3, stop=()))
    for candidate in sampled.candidates:
        assert fim_tokenizer.decode(candidate.token_ids).startswith("t")
        assert candidate.text == fim_tokenizer.decode(candidate.token_ids)[1:]
    untyped = GenerationRequest("class Store:\n    def save(self):\n        ", suffix=SUFFIX, k=1, max_new_tokens=4)
    assert healed.generate(untyped).stats.prompt_tokens == plain.generate(untyped).stats.prompt_tokens  # nothing typed


def test_a_bounded_prefix_keeps_the_beginning_a_cached_window_had_until_it_holds_twice_the_budget(
    fim_model, fim_tokenizer
):
    """The editor's cursor moves down a few lines at a time: each bounded prefix begins where the last one began (so
    the prefix cache gives everything up to the old cursor), until the window reaches twice its budget."""
    from engine.text.infill import lines_within

    encode = lambda text: fim_tokenizer(text, add_special_tokens=False)["input_ids"]
    lines = [f"    value_{i} = compute({i}, {i * 7 % 13})\n" for i in range(400)]  # 37 tokens each
    text = "".join(lines[:100])
    first_fit = lines_within(text, 400, encode, from_end=True, starts=frozenset())
    starts = frozenset({"".join(first_fit.splitlines(keepends=True)[:2])})
    assert lines_within(text + "".join(lines[100:106]), 400, encode, from_end=True, starts=starts).startswith(
        first_fit
    )  # 6 lines further down: the same beginning
    far = lines_within(text + "".join(lines[100:130]), 400, encode, from_end=True, starts=starts)
    assert not far.startswith(first_fit.split("\n")[0]) and len(encode(far)) <= 400 + 37  # past twice: a new one
    headed = ["#\n", "a = 1\n", "#\n", "b = 2\n"] + lines[:14]  # a window began at the second "#", not the first
    assert lines_within("".join(headed), 400, encode, from_end=True, starts=frozenset({"#\nb = 2\n"})) == "".join(
        headed[2:]
    )

    engine = fim_engine(fim_model, fim_tokenizer)
    ask = lambda cursor: GenerationRequest(
        "".join(lines[:cursor]) + "    ",
        suffix="".join(lines[cursor : cursor + 10]),
        k=1,
        max_new_tokens=2,
        context_tokens=600,
        seed=0,
        stop=(),
    )
    engine.generate(ask(100))
    moved = engine.generate(ask(106)).stats
    assert moved.cached_prompt_tokens > 400  # the old window's lines up to the old cursor came from the cache
    assert moved.prompt_tokens - moved.cached_prompt_tokens < 6 * 37 + 150 + 10  # moved lines, suffix, markers


def test_a_window_that_moved_reuses_the_cached_lines_it_kept_where_they_land(fim_model, fim_tokenizer):
    """The editor's ring of other files loses a chunk from its middle: the chunks after it and the code come from
    the cache at their new places (moved_prompt_tokens), unless moved reuse is off."""
    chunk = lambda name: ContextFile(name, "".join(f"    {name}_{i} = compute({i})\n" for i in range(8)))
    ask = lambda extra: GenerationRequest(
        PREFIX, suffix=SUFFIX, extra=extra, k=1, max_new_tokens=2, context_tokens=600, seed=0, stop=()
    )
    stats = {}
    for moved_reuse in (True, False):
        engine = fim_engine(fim_model, fim_tokenizer, moved_reuse=moved_reuse)
        engine.generate(ask((chunk("a"), chunk("b"), chunk("c"))))
        stats[moved_reuse] = engine.generate(ask((chunk("a"), chunk("c")))).stats
    assert stats[True].moved_prompt_tokens > 64 and stats[False].moved_prompt_tokens == 0
    assert stats[True].cached_prompt_tokens >= stats[False].cached_prompt_tokens + 64
    assert stats[True].prompt_tokens == stats[False].prompt_tokens  # the same prompt, read with less computed
