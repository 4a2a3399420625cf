"""The engine: one prompt, k rows, batched (speculative) sampling with a KV cache, stopping by the deadline."""

from __future__ import annotations

import functools
import inspect
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from engine.attention import attends_packed, key_shifter, packed_attention
from engine.kv_cache import PACKED_ROWS, PackedRows, RaggedKVCache, UnpackedCall
from engine.prefix_cache import PrefixCache, PromptReading, read_prompt
from engine.sampling import PositionUniforms, inverse_cdf, token_logprobs, warp_probs
from engine.settings import ACCEPTANCE_CHOICES, DRAFTER_CHOICES, EngineSettings
from engine.speculation.acceptance import speculative_accept
from engine.speculation.controller import ControllerMemory, DraftController, StepPlan, StepRecord
from engine.speculation.drafters import (
    Draft,
    DraftContext,
    Drafter,
    ModelDrafter,
    merge_drafts,
    prompt_lookup_drafter,
    sibling_drafter,
)
from engine.text.chat import CLOSING_FENCE, answer_enders, chat_form_for
from engine.text.infill import WINDOW_START_LINES, FimFormat, require_fim, typed_at_cursor
from engine.text.stopping import RowState, StopRules, line_end_after
from engine.types import (
    FINISH_BUDGET,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    InvalidRequest,
    InvalidSetting,
)


def forward(model, cache: RaggedKVCache, input_ids: torch.Tensor, keep_last: int | torch.Tensor = 0) -> torch.Tensor:
    """One forward of q tokens per row through the ragged cache: [B, q] -> logits [B, q or keep_last, V]
    (keep_last: the last n positions, 0 for all, or a 1-D tensor of the positions to keep)."""
    q_len = input_ids.shape[1]
    with torch.inference_mode(), packed_attention(model):
        out = model(
            input_ids=input_ids,
            attention_mask=cache.attention_mask(q_len, model.dtype),
            position_ids=cache.position_ids(q_len),
            use_cache=True,
            logits_to_keep=keep_last,
            **{_cache_argument(type(model)): cache},
        )
    return out.logits


def forward_ragged(
    model, cache: RaggedKVCache, input_ids: torch.Tensor, counts: torch.Tensor
) -> tuple[torch.Tensor, PackedRows, int]:
    """A forward of each row's first counts[b] tokens of input_ids [B, q] -> (logits [N, V] of those N = sum(counts)
    tokens end to end, the PackedRows that say whose each is, the token rows the call computed). Rows of unequal
    counts go as one packed call of N token rows when the model attends with SDPA (attention.packed_sdpa_forward
    lays them out per row); otherwise, or with nothing to save, as [B, q] like `forward`: so too for a model whose
    attention layers do not hand the cache the forward's keywords (transformers' GPT-NeoX, GPT-Neo), found when the
    packed call stops at its first layer's cache write. The cache's rows advance by what the caller commits."""
    packed = PackedRows.of(counts)
    batch, q_len = input_ids.shape
    if q_len > 1 and not bool((counts == q_len).all()) and attends_packed(model):
        try:
            with torch.inference_mode(), packed_attention(model):
                out = model(
                    input_ids=packed.pack(input_ids)[None],  # [1, N]
                    attention_mask=cache.attention_mask(packed.width, model.dtype),  # [B, 1, width, T]
                    position_ids=packed.pack(cache.position_ids(packed.width))[None],  # [1, N]
                    use_cache=True,
                    logits_to_keep=0,
                    **{_cache_argument(type(model)): cache, PACKED_ROWS: packed},
                )
            return out.logits[0], packed, len(packed.rows)
        except UnpackedCall:
            pass
    return packed.pack(forward(model, cache, input_ids)), packed, batch * q_len


def _encode(tokenizer, text: str) -> list[int]:
    """Token ids of text read as text: a special token's spelling typed in the code stays characters."""
    if not text:
        return []
    return tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]


@functools.cache
def _cache_argument(model_class) -> str:
    """The name a model's forward takes its KV cache by: `cache` in transformers >= 5.2x, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


@dataclass
class _Run:
    """The state of one generate() call."""

    request: GenerationRequest
    prompt_ids: list[int]
    rows: list[RowState]
    rules: StopRules
    cache: RaggedKVCache
    generator: torch.Generator  # acceptance tests and draft samples of the "residual" rule
    uniforms: PositionUniforms  # the number behind every (row, position)'s token
    deadline: float
    started: float
    stats: GenerationStats
    active: list[int]  # original indices of unfinished rows, in batch order
    round_number: int = 1  # the draft/verify round under way (1: the first after the prompt's prefill)
    line_marks: dict[int, int] | None = None  # past the budget (budget_waits_for_line): each row's text length
    # at the deadline; a newline after it ends the row
    healing: Healing | None = None  # the typed text the first token must begin with (token healing)

    def decode(self, decode: Callable[[list[int]], str], token_ids: list[int]) -> str:
        """A row's text: its tokens decoded, less the typed text a healed first token repeats."""
        text = decode(token_ids)
        if self.healing is not None and text.startswith(self.healing.text):
            return text[len(self.healing.text) :]
        return text


@dataclass(frozen=True)
class Healing:
    """Token healing: the prompt's last tokens, the partial word typed at the cursor, are backed over, and the first
    generated token must begin with their text, so the model finishes the word with a token it would have chosen for
    the whole word (" retur" + "n" splits a word where the model never saw it split; " r" + "ai" is backed over
    whole, and " raise" may follow, where "ai" alone would ask for a token the word never holds)."""

    text: str  # the backed-over tokens' text; rows' texts leave it out (the client has it typed already)
    allowed: torch.Tensor  # [V] bool: the tokens whose text begins with it
    tokens: int = 1  # how many prompt tokens were backed over


HEALING_MASKS = 256  # token healing's masks kept (each one bool per vocabulary entry: 150 KB for the bundled models)
HEALING_TOKENS = 3  # at most this many tokens of the typed word are backed over
WINDOW_LINE_TOKENS = 96  # tokens read of a cached prompt's window to find its first lines (longer ones: no start)


class Engine:
    """Generates k candidates for a prompt with a target model and (optionally) drafters."""

    def __init__(self, model, tokenizer, draft_model=None, settings: EngineSettings | None = None):
        self.model, self.tokenizer, self.draft_model = model, tokenizer, draft_model
        self.settings = settings or EngineSettings()
        if self.settings.drafter not in DRAFTER_CHOICES:
            raise ValueError(
                f"drafter={self.settings.drafter!r} is unknown: choose one of {', '.join(DRAFTER_CHOICES)}"
            )
        if self.settings.drafter == "model" and draft_model is None:
            raise InvalidSetting(
                "drafter='model' needs a draft model: give the engine one (draft_model) or choose another drafter",
                settings={"draft_model": "draft_model"},
            )
        if not isinstance(self.settings.prefill_chunk, int) or self.settings.prefill_chunk < 1:
            raise ValueError(
                f"prefill_chunk={self.settings.prefill_chunk!r} is out of range: it must be an integer >= 1"
            )
        if self.settings.acceptance not in ACCEPTANCE_CHOICES:
            raise ValueError(
                f"acceptance={self.settings.acceptance!r} is unknown: choose one of {', '.join(ACCEPTANCE_CHOICES)}"
            )
        self.device = next(model.parameters()).device
        for name, loaded in (("model", model), ("draft model", draft_model)):
            _check_attention(name, loaded)
        self.eos_ids = end_of_text_ids(model, tokenizer)
        self.context_limit = getattr(model.config, "max_position_embeddings", None) or 32768
        self.memory = ControllerMemory(self.settings.controller)  # measured costs and acceptance, across requests
        self.fim = FimFormat.of(tokenizer)  # None: the model cannot fill in a middle
        self.chat = chat_form_for(self.settings.prompt_form, tokenizer, model)  # None: continuations read raw
        self._vocabulary = tokenizer.get_vocab()  # spelling -> id (token healing)
        self.shift_keys = key_shifter(model)  # moves cached keys to other positions; None: the model cannot
        # backed-over token ids -> the tokens that may finish them (at most HEALING_MASKS, the oldest out: a
        # keystroke's request finds its word's mask)
        self._healing_masks: dict[tuple[int, ...], torch.Tensor] = {}
        self.not_first = self._not_first(tokenizer) if self.chat is not None else None  # no chat-form row begins so
        cache_bytes = int(self.settings.prefix_cache_mb * 2**20)
        self.prefix_cache = PrefixCache(cache_bytes)  # the target's recent prompts
        self.draft_prefix_cache = PrefixCache(cache_bytes) if draft_model is not None else None

    def generate(
        self,
        request: GenerationRequest,
        on_update: Callable[[GenerationResult], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        """Sample request.k continuations; returns by the deadline (plus at most one forward) with what it has."""
        request.validate()
        run = self._start(request)
        drafters = self._drafters(run)
        controller = DraftController(
            self.settings.controller,
            list(drafters),
            {n for n, d in drafters.items() if d.uses_model},
            self.memory,
            request.temperature,
        )
        self._prefill(run, on_update, should_stop)
        run.stats.prefill_s = time.perf_counter() - run.started
        if request.budget_after_prompt:
            run.deadline = time.perf_counter() + request.budget_s
        self._notify(run, on_update)
        while run.active and not (should_stop and should_stop()):
            if time.perf_counter() >= run.deadline:
                if not request.budget_waits_for_line:
                    break
                run.deadline = math.inf  # past the budget, rows end at their next newline (or by their rules)
                run.line_marks = {r: len(run.rows[r].text) for r in run.active}
            if run.line_marks is not None:
                self._end_rows_with_a_line(run)
                if not run.active:
                    break
            self._round(run, drafters, controller)
            self._notify(run, on_update)
        for row in run.rows:
            row.finish_reason = row.finish_reason or FINISH_BUDGET
        run.stats.drafter_choices = dict(controller.choices)
        return self._result(run)

    # --- one request ------------------------------------------------------------------------------
    def _start(self, request: GenerationRequest) -> _Run:
        prompt_ids = self._prompt_ids(request)
        healing = self._healing(request, prompt_ids)
        if healing is not None:
            prompt_ids = prompt_ids[: -healing.tokens]
        room = self.context_limit - request.max_new_tokens - self.settings.controller.max_length - 1
        if not prompt_ids or len(prompt_ids) > room:
            raise InvalidRequest(
                f"prompt is {len(prompt_ids)} tokens: with max_new_tokens={request.max_new_tokens} "
                f"it must be 1..{max(room, 0)} tokens for this model's context of "
                f"{self.context_limit}"
            )
        seed = request.seed if request.seed is not None else random.SystemRandom().randrange(2**63)
        capacity = len(prompt_ids) + request.max_new_tokens + self.settings.controller.max_length + 1  # per row
        started = time.perf_counter()
        return _Run(
            request=request,
            prompt_ids=prompt_ids,
            rows=[RowState() for _ in range(request.k)],
            rules=StopRules.of(request, self.eos_ids, self._form_stops(request), healed=healing is not None),
            cache=RaggedKVCache(self.model.config.num_hidden_layers, 1, self.device, capacity),
            generator=torch.Generator(self.device).manual_seed(seed),
            uniforms=PositionUniforms(seed),
            deadline=started + (request.budget_s if not request.budget_after_prompt else float("inf")),
            started=started,
            stats=GenerationStats(prompt_tokens=len(prompt_ids)),
            active=list(range(request.k)),
            healing=healing,
        )

    def _healing(self, request: GenerationRequest, prompt_ids: list[int]) -> Healing | None:
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
            if ids not in self._healing_masks:
                if len(self._healing_masks) >= HEALING_MASKS:
                    self._healing_masks.pop(next(iter(self._healing_masks)))
                self._healing_masks[ids] = self._tokens_beginning(ids, text)
            if count == 1 or bool(self._healing_masks[ids].any()):
                best = Healing(text, self._healing_masks[ids], count)
            if text[:1].isspace():  # the word's first token (it holds the blank before it): back over no more
                break
        return best

    def _tokens_beginning(self, token_ids: tuple[int, ...], text: str) -> torch.Tensor:
        """[V] bool: the ordinary tokens whose text begins with `text`, the text of `token_ids` (a single token is
        among them). Those whose spelling begins with the tokens' spelling are the candidates (byte-level BPE spells
        each byte as one symbol); each is kept when its decoded text begins with `text`; special and added tokens
        never are."""
        spelled = "".join(self.tokenizer.convert_ids_to_tokens(list(token_ids)))
        width = self.model.config.vocab_size
        added = set(self.tokenizer.get_added_vocab().values()) | set(self.eos_ids)
        ids = [i for s, i in self._vocabulary.items() if i < width and i not in added and s.startswith(spelled)]
        ids = [i for i in ids if self._decode([i]).startswith(text)] + list(
            token_ids[:1] if len(token_ids) == 1 else ()
        )
        allowed = torch.zeros(width, dtype=torch.bool, device=self.device)
        if ids:
            allowed[torch.tensor(ids, dtype=torch.long, device=self.device)] = True
        return allowed

    def _drafters(self, run: _Run) -> dict[str, Drafter]:
        choice = self.settings.drafter
        drafters: dict[str, Drafter] = {}
        if choice in ("sibling", "auto") and run.request.k > 1:
            drafters["sibling"] = sibling_drafter()
        if choice == "prompt" or (choice in ("sibling", "auto") and run.request.k == 1):
            drafters["prompt"] = prompt_lookup_drafter()
        if choice == "model" or (choice == "auto" and self.draft_model is not None):
            request = run.request
            drafters["model"] = ModelDrafter(
                self.draft_model,
                run.prompt_ids,
                request.temperature,
                request.top_p,
                run.generator,
                forward,
                self.settings.controller.min_draft_confidence,
                self.settings.check_cache,
                capacity=run.cache.capacity,
                acceptance=self.settings.acceptance,
                uniforms=run.uniforms,
                prefix_cache=self.draft_prefix_cache,
                chunk_tokens=self.settings.prefill_chunk,
            )
        return drafters

    def _prompt_ids(self, request: GenerationRequest) -> list[int]:
        """The prompt's tokens: the text as it is or in the chat form, or a middle's prompt in the FIM format."""
        encode = functools.partial(_encode, self.tokenizer)
        if request.is_infill:
            name = getattr(self.model.config, "_name_or_path", "") or type(self.model).__name__
            if request.extra_tokens is not None:  # other files get what the context leaves (llama.cpp's n_extra_take)
                room = (
                    self.context_limit
                    - (request.context_tokens or 0)
                    - 2 * request.max_new_tokens
                    - self.settings.controller.max_length
                    - 16
                )
                request = replace(request, extra_tokens=max(0, min(request.extra_tokens, room)))
            starts = self._window_starts() if request.context_tokens is not None else frozenset()
            return require_fim(self.fim, name).prompt_ids(request, encode, starts)
        if self._in_chat_form(request):
            return self.chat.prompt_ids(request.prompt, encode, self._encode_special)
        return encode(request.prompt)

    def _window_starts(self) -> frozenset[str]:
        """How the bounded prefixes of recent middles' prompts (those in the prefix cache) began, their first
        WINDOW_START_LINES lines: a new window that begins there reads its beginning from the cache
        (infill.lines_within)."""
        marker = self.fim.ids[self.fim.spelling.prefix]
        starts = set()
        for prompt in self.prefix_cache.prompts():
            if marker in prompt:
                after = prompt.index(marker) + 1
                lines = self._decode(list(prompt[after : after + WINDOW_LINE_TOKENS])).splitlines(keepends=True)
                if len(lines) > WINDOW_START_LINES:  # the lines after them began too: they are whole
                    starts.add("".join(lines[:WINDOW_START_LINES]))
        return frozenset(starts)

    def _in_chat_form(self, request: GenerationRequest) -> bool:
        """Whether the request's prompt is read in the chat form (a continuation, on an engine that has one)."""
        return self.chat is not None and not request.is_infill

    def _not_first(self, tokenizer) -> torch.Tensor | None:
        """The ids a chat-form row cannot begin with (chat.answer_enders), those within the model's logits."""
        width = self.model.config.vocab_size  # the logits' width (a swapped head in another format has no .weight)
        ids = [i for i in answer_enders(tokenizer, self.eos_ids) if 0 <= i < width]
        return torch.tensor(ids, dtype=torch.long, device=self.device) if ids else None

    def _encode_special(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _form_stops(self, request: GenerationRequest) -> tuple[str, ...]:
        """Stop strings the prompt's form adds: the chat form's closing fence."""
        return (CLOSING_FENCE,) if self._in_chat_form(request) else ()

    def _prefill(self, run: _Run, on_update, should_stop) -> None:
        """Read the prompt once (batch 1; the longest prefix a recent request left in the prefix cache is copied,
        the rest computed in chunks with progress, stopped by the deadline or a cancel), fan the cache out to k
        rows, sample every row's first token."""

        def go_on(reading: PromptReading) -> bool:
            run.stats.cached_prompt_tokens, run.stats.prompt_read_tokens = reading.cached, reading.read
            self._notify(run, on_update)  # progress: tokens read of the prompt's total
            return time.perf_counter() < run.deadline and not (should_stop and should_stop())

        moving = run.request.context_tokens is not None  # the editor's bounded window: its kept lines move
        reading = read_prompt(
            forward,
            self.model,
            run.cache,
            run.prompt_ids,
            self.prefix_cache,
            self.settings.prefill_chunk,
            go_on,
            shift_keys=self.shift_keys if moving and self.settings.moved_reuse else None,
        )
        run.stats.forward_passes += reading.forwards
        run.stats.cached_prompt_tokens, run.stats.prompt_read_tokens = reading.cached, reading.read
        run.stats.moved_prompt_tokens = reading.moved
        if not reading.done:  # cut while reading: no row has a token (what was read stays cached)
            run.active = []
            return
        logits = reading.last_logits  # [1, V]
        run.cache.select_rows(torch.zeros(run.request.k, dtype=torch.long, device=self.device))
        logits = logits.expand(run.request.k, -1)  # [k, V]
        rows = list(range(run.request.k))
        first_uniform = run.uniforms.at(rows, [0] * len(rows), 1)[:, 0]  # [k]
        allowed = logits
        if self.not_first is not None and self._in_chat_form(run.request):  # a chat-form answer does not end at once
            allowed = logits.index_fill(-1, self.not_first, float("-inf"))
        if run.healing is not None:  # the first token finishes the typed word
            allowed = allowed.masked_fill(~run.healing.allowed, float("-inf"))
        decode = functools.partial(run.decode, self._decode)
        first_tokens = inverse_cdf(_target_probs(run.request, allowed, rows), first_uniform)
        first_logprobs = token_logprobs(logits, first_tokens)
        for row_index, row in enumerate(run.rows):
            run.rules.extend(row, [int(first_tokens[row_index])], [float(first_logprobs[row_index])], decode)
        run.stats.generated_tokens = sum(len(r.token_ids) for r in run.rows)
        self._drop_finished(run)

    def _round(self, run: _Run, drafters: dict[str, Drafter], controller: DraftController) -> None:
        """One draft/verify round over the active rows."""
        request, batch = run.request, len(run.active)
        step_started = time.perf_counter()
        context = DraftContext(
            run.prompt_ids,
            [r.token_ids for r in run.rows],
            list(run.active),
            self.settings.controller.max_lookup_length,
            run.deadline,
            round_number=run.round_number,
        )
        # 1. draft: free lookups first, so the controller can weigh what they actually found
        lookups = {n: d.propose(context) for n, d in drafters.items() if not d.uses_model}
        plan = controller.plan(batch, {n: d.lengths.tolist() for n, d in lookups.items()})
        draft, step = self._draft(run, drafters, lookups, plan, context)
        if time.perf_counter() >= run.deadline:
            run.stats.draft_passes += step.draft_passes  # drafted but never verified: the forwards were still spent
            return
        # 2. verify: [pending, draft tokens] of every row in one target forward, each row only its own tokens
        draft_lengths = draft.lengths.to(self.device)
        width = int(draft_lengths.max())  # no wider than the longest row's draft
        draft_tokens = draft.tokens[:, :width].to(self.device)  # [B, K]
        draft_probs = None if draft.probs is None else draft.probs[:, :width]
        pending = torch.tensor([run.rows[r].token_ids[-1] for r in run.active], device=self.device)  # [B]
        verify_input = torch.cat([pending[:, None], draft_tokens], dim=1)  # [B, K+1]
        logits, packed, step.token_rows = forward_ragged(
            self.model, run.cache, verify_input, draft_lengths + 1
        )  # [N, V]
        # 3. accept: exact speculative sampling, each row its own number of tokens; distributions and samples
        # only at the N verified positions (a top-p warp and a cumulative sum over the vocabulary each)
        target_probs = _target_probs(request, logits, [run.active[b] for b in packed.rows.tolist()])  # [N, V]
        positions = [len(run.rows[r].token_ids) for r in run.active]  # where each row's draft begins
        sample_uniform = run.uniforms.at(run.active, positions, width + 1)  # [B, K+1]
        target_samples = inverse_cdf(target_probs, packed.pack(sample_uniform.to(self.device)))  # [N]
        n_accepted, next_tokens = speculative_accept(
            draft_tokens,
            draft_probs,
            None if draft_probs is None else packed.pad(target_probs, batch, width + 1),
            draft_lengths,
            run.generator,
            sample_uniform,
            packed.pad(target_samples, batch, width + 1),
        )  # [B], [B]
        # 4. commit: the cache keeps [pending, accepted drafts]; the new token is the next pending one
        run.cache.commit(n_accepted + 1)
        committed = torch.cat([draft_tokens, next_tokens[:, None]], dim=1)  # [B, K+1]
        committed[torch.arange(batch), n_accepted] = next_tokens
        kept = packed.offsets <= n_accepted[packed.rows]  # [N]: the positions each row commits
        kept_logprobs = token_logprobs(logits[kept], packed.pack(committed)[kept])  # [sum(n + 1)]
        for i, (row_index, logprobs) in enumerate(zip(run.active, kept_logprobs.split((n_accepted + 1).tolist()))):
            run.rules.extend(
                run.rows[row_index],
                committed[i, : len(logprobs)].tolist(),
                logprobs.tolist(),
                functools.partial(run.decode, self._decode),
            )
        # 5. adapt: costs and acceptance feed the next plan; the step's cost is all of it but the draft model's work
        step.accepted = n_accepted.tolist()
        step.verify_s = time.perf_counter() - step_started - step.draft_s - step.setup_s
        controller.observe(step)
        self._count(run, step)
        run.round_number += 1
        self._drop_finished(run)

    def _draft(
        self, run: _Run, drafters, lookups: dict[str, Draft], plan: StepPlan, context: DraftContext
    ) -> tuple[Draft, StepRecord]:
        """The plan's draft, truncated to its length, and the round's record so far; a model drafter runs here
        (timed, its one-offs apart), alone or for the rows the lookup found nothing for."""
        batch = len(run.active)
        if plan.drafter is None:
            empty = Draft.empty(batch, self.device)
            return empty, self._record(plan, empty, None)
        lookup = lookups.get(plan.drafter)
        if lookup is not None:
            lookup = Draft(lookup.tokens[:, : plan.length], lookup.lengths.clamp(max=plan.length))
            if plan.fallback is None:
                return lookup, self._record(plan, lookup, lookup)
        drafter = drafters[plan.fallback or plan.drafter]
        started = time.perf_counter()
        drafted = drafter.propose(replace(context, max_len=plan.length))  # the plan's length, not the lookup cap
        draft_s = time.perf_counter() - started - drafted.setup_s  # its one-offs (prefill, catching up) apart
        run.stats.draft_passes += drafted.setup_passes  # one-offs count as draft passes, verified or not
        draft = drafted if lookup is None else merge_drafts(lookup, drafted)
        return draft, self._record(plan, draft, lookup, draft_s, drafted.passes, drafted.setup_s)

    @staticmethod
    def _record(
        plan: StepPlan,
        draft: Draft,
        lookup: Draft | None,
        draft_s: float = 0.0,
        draft_passes: int = 0,
        setup_s: float = 0.0,
    ) -> StepRecord:
        batch = int(draft.lengths.shape[0])
        row_drafters = plan.row_drafters(None if lookup is None else lookup.lengths.tolist(), batch)
        return StepRecord(plan, batch, row_drafters, draft_s, draft_passes, setup_s, proposed=draft.lengths.tolist())

    def _count(self, run: _Run, step: StepRecord) -> None:
        stats = run.stats
        stats.forward_passes += 1
        stats.draft_passes += step.draft_passes
        stats.proposed_tokens += sum(step.proposed)
        stats.accepted_tokens += sum(step.accepted)
        stats.speculative_steps += 1 if any(step.proposed) else 0
        stats.drafted_rows += sum(1 for n in step.proposed if n > 0)
        stats.generated_tokens = sum(len(r.token_ids) for r in run.rows)

    def _end_rows_with_a_line(self, run: _Run) -> None:
        """Past the budget, a row ends at the first newline it writes after the deadline (llama.cpp's
        t_max_predict_ms, which stops "upon another new line"): its text ends with whole lines."""
        for r in run.active:
            row = run.rows[r]
            end = line_end_after(row.text, run.line_marks[r])
            if end is not None:
                StopRules.end_row_at(row, end, functools.partial(run.decode, self._decode))
                row.finish_reason = FINISH_BUDGET
        self._drop_finished(run)

    def _drop_finished(self, run: _Run) -> None:
        """Finished rows leave the batch: their cache rows are dropped so they stop costing compute."""
        keep = [i for i, r in enumerate(run.active) if run.rows[r].finish_reason is None]
        if len(keep) == len(run.active):
            return
        run.active = [run.active[i] for i in keep]
        if keep:
            run.cache.select_rows(torch.tensor(keep, device=self.device))

    # --- output -------------------------------------------------------------------------------------
    def _decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def _result(self, run: _Run) -> GenerationResult:
        run.stats.wall_s = time.perf_counter() - run.started
        return GenerationResult([r.as_candidate() for r in run.rows], replace(run.stats))  # a snapshot: the run goes on

    def _notify(self, run: _Run, on_update) -> None:
        if on_update is not None:
            on_update(self._result(run))


def _target_probs(request: GenerationRequest, logits: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """The distributions the target samples from, [N, V] for logits [N, V] whose i-th belongs to original row
    rows[i]: the request's temperature and top-p, and greedy for row 0 when the request asks for it
    (greedy_first)."""
    probs = warp_probs(logits, request.temperature, request.top_p)
    if request.greedy_first and request.temperature > 0 and 0 in rows:
        first = torch.tensor([r == 0 for r in rows], device=logits.device)
        probs[first] = warp_probs(logits[first], 0.0, request.top_p)
    return probs


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


ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")  # those that read the cache's additive 4-D mask


def _check_attention(name: str, model) -> None:
    """Refuse an attention implementation that ignores a custom 4-D mask (the ragged rows need it)."""
    if model is None:
        return
    implementation = getattr(model.config, "_attn_implementation", None) or "eager"
    if implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(
            f"the {name} uses attn_implementation={implementation!r}: the engine's ragged-row cache "
            f"needs one of {', '.join(ATTENTION_IMPLEMENTATIONS)}; load it with "
            "attn_implementation='sdpa'"
        )
