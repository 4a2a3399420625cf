"""The prompt a request is read as: its token ids (the text as it is, in the chat form, or a middle in the model's FIM
format), token healing of a word typed at the cursor, and what the prompt's form adds (stop strings, banned first
tokens); the engine builds one PromptPreparer and asks it once per request. Torch only for the token masks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import torch

from engine.settings import EngineSettings
from engine.text.chat import CLOSING_FENCE, answer_enders, chat_form_for, conversation_parts, read_parts
from engine.text.infill import WINDOW_START_LINES, FimFormat, require_fim, typed_at_cursor
from engine.types import GenerationRequest

HEALING_MASKS = 256  # token healing's masks kept (each one bool per vocabulary entry: 150 KB for the bundled models)
HEALING_TOKENS = 3  # at most this many tokens of the typed word are backed over
WINDOW_LINE_TOKENS = 96  # tokens read of a cached prompt's window to find its first lines (longer ones: no start)


@dataclass(frozen=True)
class Healing:
    """Token healing: the prompt's last tokens, the partial word typed at the cursor, are backed over, and the first
    generated token must begin with their text, so the model finishes the word with a token it would have chosen for
    the whole word (" retur" + "n" splits a word where the model never saw it split; " r" + "ai" is backed over
    whole, and " raise" may follow, where "ai" alone would ask for a token the word never holds)."""

    text: str  # the backed-over tokens' text; rows' texts leave it out (the client has it typed already)
    allowed: torch.Tensor  # [V] bool: the tokens whose text begins with it
    tokens: int = 1  # how many prompt tokens were backed over


@dataclass(frozen=True)
class PreparedPrompt:
    """A request's prompt as the decode loop reads it."""

    ids: list[int]  # the prompt's tokens, less those token healing backed over
    healing: Healing | None  # the typed text the first token must begin with; None: not healed
    stops: tuple[str, ...]  # stop strings the prompt's form adds: the chat form's closing fence
    not_first: torch.Tensor | None  # [n] ids no row may begin with (a chat-form answer does not end at once)


class PromptPreparer:
    """Turns a request into the prompt a model reads; keeps what outlives a request (the forms, the healing masks)."""

    def __init__(
        self,
        model,
        tokenizer,
        settings: EngineSettings,
        eos_ids: frozenset[int],
        context_limit: int,
        recent_prompts: Callable[[], Iterable[tuple[int, ...]]],  # the prefix cache's prompts (an editor's windows)
    ):
        self.tokenizer, self.settings, self.eos_ids = tokenizer, settings, eos_ids
        self.context_limit, self.recent_prompts = context_limit, recent_prompts
        self.model_name = getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.vocab_size = model.config.vocab_size  # the logits' width (a swapped head in another format has no .weight)
        self.device = next(model.parameters()).device
        self.fim = FimFormat.of(tokenizer)  # None: the model cannot fill in a middle
        self.chat = chat_form_for(settings.prompt_form, tokenizer, model)  # None: continuations read raw
        self._vocabulary = tokenizer.get_vocab()  # spelling -> id (token healing)
        # backed-over token ids -> the tokens that may finish them (at most HEALING_MASKS, the oldest out: a
        # keystroke's request finds its word's mask)
        self._healing_masks: dict[tuple[int, ...], torch.Tensor] = {}
        self.not_first = self._not_first() if self.chat is not None else None  # no chat-form row begins so

    def prepare(self, request: GenerationRequest) -> PreparedPrompt:
        """The request's prompt: its ids less what healing backs over, the healing, and what its form adds."""
        ids = self.prompt_ids(request)
        healing = self.healing(request, ids)
        if healing is not None:
            ids = ids[: -healing.tokens]
        not_first = self.not_first if self.in_chat_form(request) else None
        return PreparedPrompt(ids, healing, self.form_stops(request), not_first)

    # --- the prompt's ids ---------------------------------------------------------------------------
    def prompt_ids(self, request: GenerationRequest) -> list[int]:
        """The prompt's tokens: the text as it is or in the chat form, a middle's prompt in the FIM format, or a
        conversation in the chat template."""
        if request.in_words:
            return self._conversation_ids(request)
        if request.is_infill:
            return self._middle_ids(request)
        if self.in_chat_form(request):
            return self.chat.prompt_ids(request.prompt, self.encode, self._encode_special, request.language)
        return self.encode(request.prompt)

    def _conversation_ids(self, request: GenerationRequest) -> list[int]:
        """A request in words: its turns in the tokenizer's chat template, the answer next; a model without one
        reads the turns' text as it is."""
        parts = conversation_parts(self.tokenizer, request.turns)
        if parts is None:
            return self.encode("\n\n".join(turn.content for turn in request.turns) + "\n")
        return read_parts(parts, self.encode, self._encode_special)

    def _middle_ids(self, request: GenerationRequest) -> list[int]:
        """A middle's prompt in the FIM format: other files within the room the context leaves them, an editor's
        window beginning where a recent window began."""
        if request.extra_tokens is not None:  # other files get what the context leaves (llama.cpp's n_extra_take)
            request = replace(request, extra_tokens=max(0, min(request.extra_tokens, self._room_for_files(request))))
        starts = self._window_starts() if request.context_tokens is not None else frozenset()
        return require_fim(self.fim, self.model_name).prompt_ids(request, self.encode, starts)

    def _room_for_files(self, request: GenerationRequest) -> int:
        """Tokens the context leaves other files: less the window, twice the new tokens, a draft and a margin."""
        return (
            self.context_limit
            - (request.context_tokens or 0)
            - 2 * request.max_new_tokens
            - self.settings.controller.max_length
            - 16
        )

    def _window_starts(self) -> frozenset[str]:
        """How the bounded prefixes of recent middles' prompts (those in the prefix cache) began, their first
        WINDOW_START_LINES lines: a new window that begins there reads its beginning from the cache
        (infill.lines_within)."""
        marker = self.fim.ids[self.fim.spelling.prefix]
        starts = (self._window_start(prompt, marker) for prompt in self.recent_prompts() if marker in prompt)
        return frozenset(start for start in starts if start is not None)

    def _window_start(self, prompt: tuple[int, ...], marker: int) -> str | None:
        """The first WINDOW_START_LINES lines after a prompt's FIM prefix marker; None when they are not whole."""
        after = prompt.index(marker) + 1
        lines = self._decode(list(prompt[after : after + WINDOW_LINE_TOKENS])).splitlines(keepends=True)
        if len(lines) > WINDOW_START_LINES:  # the lines after them began too: they are whole
            return "".join(lines[:WINDOW_START_LINES])
        return None

    def in_chat_form(self, request: GenerationRequest) -> bool:
        """Whether the request's prompt is read in the chat form (a continuation, on an engine that has one)."""
        return self.chat is not None and not request.is_infill and not request.in_words

    def form_stops(self, request: GenerationRequest) -> tuple[str, ...]:
        """Stop strings the prompt's form adds: the chat form's closing fence."""
        return (CLOSING_FENCE,) if self.in_chat_form(request) else ()

    # --- token healing ------------------------------------------------------------------------------
    def healing(self, request: GenerationRequest, prompt_ids: list[int]) -> Healing | None:
        """Token healing for a middle whose cursor line has text typed before the cursor (it ends the prompt, after
        the FIM middle marker): the most tokens of the typed word (up to HEALING_TOKENS, none holding a blank but
        the first's leading ones) that some ordinary token begins with; None when it is off, nothing is typed, or
        the last token is not whole text."""
        if not (self.settings.token_healing and request.is_infill and typed_at_cursor(request.prompt)):
            return None
        best = None
        for count in range(1, min(HEALING_TOKENS, len(prompt_ids) - 1) + 1):
            ids = tuple(prompt_ids[-count:])
            text = self._decode(list(ids))
            if not text or "\ufffd" in text or any(c.isspace() for c in text.lstrip()):
                break
            allowed = self._healing_mask(ids, text)
            if count == 1 or bool(allowed.any()):
                best = Healing(text, allowed, count)
            if text[:1].isspace():  # the word's first token (it holds the blank before it): back over no more
                break
        return best

    def _healing_mask(self, token_ids: tuple[int, ...], text: str) -> torch.Tensor:
        """[V] bool: the tokens that may finish `token_ids`, kept for the next keystroke's request (the oldest out)."""
        if token_ids not in self._healing_masks:
            if len(self._healing_masks) >= HEALING_MASKS:
                self._healing_masks.pop(next(iter(self._healing_masks)))
            self._healing_masks[token_ids] = self._tokens_beginning(token_ids, text)
        return self._healing_masks[token_ids]

    def _tokens_beginning(self, token_ids: tuple[int, ...], text: str) -> torch.Tensor:
        """[V] bool: the ordinary tokens whose text begins with `text`, the text of `token_ids` (a single token is
        among them). Those whose spelling begins with the tokens' spelling are the candidates (byte-level BPE spells
        each byte as one symbol); each is kept when its decoded text begins with `text`; special and added tokens
        never are."""
        spelled = "".join(self.tokenizer.convert_ids_to_tokens(list(token_ids)))
        width = self.vocab_size
        added = set(self.tokenizer.get_added_vocab().values()) | set(self.eos_ids)
        ids = [i for s, i in self._vocabulary.items() if i < width and i not in added and s.startswith(spelled)]
        ids = [i for i in ids if self._decode([i]).startswith(text)] + list(
            token_ids[:1] if len(token_ids) == 1 else ()
        )
        allowed = torch.zeros(width, dtype=torch.bool, device=self.device)
        if ids:
            allowed[torch.tensor(ids, dtype=torch.long, device=self.device)] = True
        return allowed

    # --- special tokens -----------------------------------------------------------------------------
    def _not_first(self) -> torch.Tensor | None:
        """The ids a chat-form row cannot begin with (chat.answer_enders), those within the model's logits."""
        ids = [i for i in answer_enders(self.tokenizer, self.eos_ids) if 0 <= i < self.vocab_size]
        return torch.tensor(ids, dtype=torch.long, device=self.device) if ids else None

    def encode(self, text: str) -> list[int]:
        """Token ids of text read as text: a special token's spelling typed in the code stays characters."""
        if not text:
            return []
        return self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]

    def _encode_special(self, text: str) -> list[int]:
        """Token ids of a form's own text, whose special tokens' spellings are those tokens."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)


def end_of_text_ids(model, tokenizer) -> frozenset[int]:
    """Every token after which a model's text is over: the end-of-sequence ids of the config, the generation
    config and the tokenizer, and every special token of the tokenizer (decoding drops them, so a row that
    went on after one would glue a new text onto the old one: Qwen ends a completion with <|endoftext|>, which
    its generation config lists only as padding)."""
    ids = set(getattr(tokenizer, "all_special_ids", None) or [])
    for token_id, token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(token, "special", False):
            ids.add(token_id)
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        ids.update(value if isinstance(value, (list, tuple, set)) else [value] if value is not None else [])
    return frozenset(int(i) for i in ids)
