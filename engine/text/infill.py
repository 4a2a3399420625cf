"""Fill-in-the-middle: the model's own FIM format, read from its tokenizer, turns prefix, suffix and other files into
prompt tokens; a prompt that already carries the markers (as Continue builds it) is split back into its parts."""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass

from engine.types import ContextFile, GenerationRequest, InvalidRequest


@dataclass(frozen=True)
class FimSpelling:
    """How one model family spells its fill-in-the-middle markers."""

    prefix: str
    suffix: str
    middle: str
    repo_name: str | None = None  # repo-level context: <repo_name>name, then <file_sep>path\ntext per file
    file_sep: str | None = None


SPELLINGS = (
    FimSpelling("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|repo_name|>", "<|file_sep|>"),  # Qwen2.5-Coder
    FimSpelling("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<repo_name>", "<file_sep>"),  # StarCoder 2
)
REPO_NAME = "project"  # the repository name given before other files (the model only needs one)
CURRENT_FILE = "current_file"  # the name given to the file being edited, after the other files


@dataclass(frozen=True)
class FimFormat:
    """A model's FIM markers as token ids: prompt layout <prefix>P<suffix>S<middle>, the middle is generated."""

    spelling: FimSpelling
    ids: dict[str, int]  # marker text -> token id

    @staticmethod
    def of(tokenizer) -> FimFormat | None:
        """The format a tokenizer's vocabulary supports, or None when it has no FIM markers."""
        vocab = tokenizer.get_vocab()
        for spelling in SPELLINGS:
            markers = [spelling.prefix, spelling.suffix, spelling.middle]
            if all(m in vocab for m in markers):
                repo = [m for m in (spelling.repo_name, spelling.file_sep) if m is not None and m in vocab]
                return FimFormat(spelling, {m: vocab[m] for m in markers + repo})
        return None

    @property
    def has_files(self) -> bool:
        return self.spelling.file_sep in self.ids and self.spelling.repo_name in self.ids

    def prompt_ids(self, request: GenerationRequest, encode, window_starts: frozenset[str] = frozenset()) -> list[int]:
        """The token ids of a middle's prompt: other files first (they change least, so a prefix cache keeps them),
        then <prefix> the prefix's whole lines <suffix> suffix <middle> the cursor line's text before the cursor
        (when it is more than indentation). That text begins the middle, as if the model had written it: typing on a
        line changes only the tokens after <middle>, so the next keystroke's request finds everything before them
        in the prefix cache. encode(text) -> ids reads the user's text as text (a marker typed in the code is not
        a marker). window_starts: how recent prompts' bounded prefixes began (lines_within's `starts`)."""
        s, ids = self.spelling, self.ids
        tokens: list[int] = []
        extra = (
            request.extra if request.extra_tokens is None else files_within(request.extra, request.extra_tokens, encode)
        )
        if extra and self.has_files:
            tokens += [ids[s.repo_name]] + encode(REPO_NAME + "\n")
            for context in extra:
                tokens += [ids[s.file_sep]] + encode(f"{context.name}\n{context.text}")
            tokens += [ids[s.file_sep]] + encode(CURRENT_FILE + "\n")
        elif extra:  # no file markers: the other files as plain text before the prefix marker
            tokens += encode("".join(f"# file: {c.name}\n{c.text}\n" for c in extra))
        typed = typed_at_cursor(request.prompt)
        head, suffix, typed_ids = request.prompt[: len(request.prompt) - len(typed)], request.suffix, encode(typed)
        if request.context_tokens is not None:  # 3/4 before, as llama-server's split of its batch; SUFFIX_SHARE after
            head = lines_within(head, request.context_tokens * 3 // 4, encode, from_end=True, starts=window_starts)
            after = int(request.context_tokens * SUFFIX_SHARE)
            suffix = lines_within(suffix, max(after - 2 - len(typed_ids), 0), encode)
        return tokens + (
            [ids[s.prefix]] + encode(head) + [ids[s.suffix]] + encode(suffix) + [ids[s.middle]] + typed_ids
        )


def typed_at_cursor(prompt: str) -> str:
    """The cursor line's text before the cursor when it is more than indentation, else "": only indentation stays in
    the prefix (measured, bundled models: after the middle marker it gave empty or over-indented middles)."""
    typed = prompt.rpartition("\n")[2]
    return typed if typed.strip() else ""


# the code after the cursor a bounded middle reads, as a share of its context_tokens: chosen by measurement on
# llama.vim's requests (docs/MEASUREMENTS.md): 1/8 was right more often than llama-server's 1/4 and 1/16, and reads less
SUFFIX_SHARE = 1 / 8
WINDOW_START_LINES = 2  # a window's beginning is known by the text of its first lines (lines_within's `starts`)
ANCHOR_EVERY = 32  # on average one line in this many is an anchor a bounded prefix may begin at (lines_within)


def lines_within(text: str, budget: int, encode, from_end: bool = False, starts: frozenset[str] = frozenset()) -> str:
    """The whole lines of `text` that fit in `budget` tokens, taken from its start (code after the cursor), or,
    taken from its end (code before the cursor), from where a recent window began or an anchor line.

    From the end, the window may begin up to the budget again before the first line that fits: at the earliest line
    there where a recent prompt's window began (`starts`: the first WINDOW_START_LINES lines of those windows, by their
    text: one line alone is often a blank, a brace or a lone "#" that occurs many times), else at the nearest anchor
    line at or before the first line that fits (at most 2 * ANCHOR_EVERY lines earlier; an anchor is a line whose text
    hashes to 0 modulo ANCHOR_EVERY), else at the first line that fits.

    The editor's next request, the cursor a few lines further down and the window shifted with it, then begins at the
    same line as the last one: the prefix cache holds everything up to the old cursor, where a window cut at a token
    count begins somewhere new every time and is read again whole. A window keeps its beginning until it reaches
    twice the budget; anchors give a first request (or one after a jump) a likely shared beginning too."""
    if len(encode(text)) <= budget:
        return text
    if budget <= 0:
        return ""
    lines = text.splitlines(keepends=True)
    if not from_end:
        kept, used = [], 0
        for line in lines:
            used += len(encode(line))
            if used > budget:
                break
            kept.append(line)
        return "".join(kept)
    cost = functools.cache(lambda index: len(encode(lines[index])))  # each line encoded once
    first = _run_back(cost, len(lines), budget)
    if starts:
        earliest = _run_back(cost, first, budget)  # at most the budget again
        for start in range(earliest, first + 1):
            if "".join(lines[start : start + WINDOW_START_LINES]) in starts:
                return "".join(lines[start:])
    for start in range(first, max(first - 2 * ANCHOR_EVERY, 0) - 1, -1):
        if start < len(lines) and lines[start].strip() and zlib.crc32(lines[start].encode()) % ANCHOR_EVERY == 0:
            if len(encode("".join(lines[start:first]))) <= budget:  # at most the budget again
                return "".join(lines[start:])
            break
    return "".join(lines[first:])


def _run_back(cost, end: int, budget: int) -> int:
    """Where the longest run of lines ending before `end` begins whose costs (cost(index) tokens) add up to at most
    `budget`."""
    start, used = end, 0
    while start > 0 and used + cost(start - 1) <= budget:
        start -= 1
        used += cost(start)
    return start


def files_within(files: tuple[ContextFile, ...], budget: int, encode) -> tuple[ContextFile, ...]:
    """The other files that fit in `budget` tokens, those nearest the end first (llama.cpp keeps the end of its
    extra context); the first that does not fit whole keeps its last lines."""
    kept: list[ContextFile] = []
    for context in reversed(files):
        cost = len(encode(f"{context.name}\n{context.text}")) + 1
        if cost > budget:
            tail = lines_within(context.text, budget - len(encode(context.name + "\n")) - 1, encode, from_end=True)
            if tail.strip():
                kept.append(ContextFile(context.name, tail))
            break
        kept.append(context)
        budget -= cost
    return tuple(reversed(kept))


def require_fim(found: FimFormat | None, model_name: str) -> FimFormat:
    """A model's FIM format (FimFormat.of its tokenizer); InvalidRequest naming the model when it has none."""
    if found is None:
        raise InvalidRequest(
            f"the model {model_name!r} has no fill-in-the-middle tokens (none of "
            f"{', '.join(s.prefix for s in SPELLINGS)} in its vocabulary): it cannot take code after "
            "the cursor (suffix). Leave the suffix empty or choose a coder model with FIM (e.g. "
            "Qwen2.5-Coder)"
        )
    return found


_ANY_MARKER = re.compile("|".join(re.escape(m) for s in SPELLINGS for m in (s.prefix, s.suffix, s.middle)))


def split_fim_prompt(prompt: str) -> tuple[str, str, tuple[ContextFile, ...]] | None:
    """(prefix, suffix, other files) of a prompt that is a FIM template in one of SPELLINGS (prefix, suffix and
    middle markers once each, in that order, the prompt ending with the middle marker), or None: any other prompt,
    code that merely mentions a marker included, is text."""
    if _ANY_MARKER.search(prompt) is None:
        return None
    for s in SPELLINGS:
        if not prompt.endswith(s.middle) or any(prompt.count(m) != 1 for m in (s.prefix, s.suffix, s.middle)):
            continue
        head, _, rest = prompt.partition(s.prefix)
        prefix, found_suffix, rest = rest.partition(s.suffix)
        if found_suffix:
            return prefix, rest[: -len(s.middle)], _files_of(head, s)
    return None


def _files_of(head: str, spelling: FimSpelling) -> tuple[ContextFile, ...]:
    """Other files written before the prefix as <file_sep>name\\ntext (the repo name and the current file's own
    name are dropped)."""
    if spelling.file_sep is None or spelling.file_sep not in head:
        return ()
    files = []
    for part in head.split(spelling.file_sep)[1:]:
        name, _, text = part.partition("\n")
        if text.strip():
            files.append(ContextFile(name.strip(), text))
    return tuple(files)
