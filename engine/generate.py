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
from engine.sampling import PositionUniforms, draw, inverse_cdf, token_logprobs, warp_probs
from engine.settings import EngineSettings
from engine.speculation.acceptance import speculative_accept
from engine.speculation.choices import ACCEPTANCE_CHOICES, DRAFTER_CHOICES
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
from engine.tails import TAIL_READ_TOKENS, forced_draft, start_tail
from engine.text.prompting import PreparedPrompt, PromptPreparer, end_of_text_ids
from engine.text.stopping import TAIL_TOKENS, RowState, StopRules, line_end_after
from engine.types import (
    FINISH_BUDGET,
    FINISH_STOP,
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


@functools.cache
def _cache_argument(model_class) -> str:
    """The name a model's forward takes its KV cache by: `cache` in transformers >= 5.2x, `past_key_values` before."""
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


@dataclass
class _Verified:
    """One round's verify pass: the drafts it checked, the target's logits at the N verified positions (packed), and
    each row's accepted count and next token."""

    draft_tokens: torch.Tensor  # [B, K]
    logits: torch.Tensor  # [N, V]
    packed: PackedRows
    n_accepted: torch.Tensor  # [B]
    next_tokens: torch.Tensor  # [B]


@dataclass
class _Run:
    """The state of one generate() call."""

    request: GenerationRequest
    prompt: PreparedPrompt  # its ids, healing and what its form adds (text.prompting)
    rows: list[RowState]
    rules: StopRules
    cache: RaggedKVCache
    generator: torch.Generator  # acceptance tests and draft samples of the "residual" rule
    uniforms: PositionUniforms  # the number behind every (row, position)'s token
    deadline: float
    started: float
    stats: GenerationStats
    active: list[int]  # original indices of the rows still growing (their text, or their tail), in batch order
    round_number: int = 1  # the draft/verify round under way (1: the first after the prompt's prefill)
    line_marks: dict[int, int] | None = None  # past the budget (Deadline.waits_for_line): each row's text length
    # at the deadline; a newline after it ends the row

    def decode(self, decode: Callable[[list[int]], str], token_ids: list[int]) -> str:
        """A row's text: its tokens decoded, less the typed text a healed first token repeats."""
        text, healing = decode(token_ids), self.prompt.healing
        if healing is not None and text.startswith(healing.text):
            return text[len(healing.text) :]
        return text


class Engine:
    """Generates k candidates for a prompt with a target model and (optionally) drafters."""

    def __init__(self, model, tokenizer, draft_model=None, settings: EngineSettings | None = None):
        self.model, self.tokenizer, self.draft_model = model, tokenizer, draft_model
        self.settings = settings or EngineSettings()
        _check_settings(self.settings, draft_model)
        self.device = next(model.parameters()).device
        for name, loaded in (("model", model), ("draft model", draft_model)):
            _check_attention(name, loaded)
        self.eos_ids = end_of_text_ids(model, tokenizer)
        self.context_limit = getattr(model.config, "max_position_embeddings", None) or 32768
        self.memory = ControllerMemory(self.settings.controller)  # measured costs and acceptance, across requests
        self.shift_keys = key_shifter(model)  # moves cached keys to other positions; None: the model cannot
        cache_bytes = int(self.settings.prefix_cache_mb * 2**20)
        self.prefix_cache = PrefixCache(cache_bytes)  # the target's recent prompts
        self.draft_prefix_cache = PrefixCache(cache_bytes) if draft_model is not None else None
        self.prompts = PromptPreparer(
            model, tokenizer, self.settings, self.eos_ids, self.context_limit, self.prefix_cache.prompts
        )

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
        if request.deadline.after_prompt:
            run.deadline = time.perf_counter() + request.budget_s
        self._notify(run, on_update)
        while run.active and not (should_stop and should_stop()):
            if time.perf_counter() >= run.deadline:
                if not request.deadline.waits_for_line:
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
        prompt = self.prompts.prepare(request)
        self._check_room(request, len(prompt.ids))
        seed = request.seed if request.seed is not None else random.SystemRandom().randrange(2**63)
        capacity = len(prompt.ids) + self._new_room(request) + self.settings.controller.max_length + 1  # per row
        started = time.perf_counter()
        return _Run(
            request=request,
            prompt=prompt,
            rows=[RowState() for _ in range(request.k)],
            rules=StopRules.of(request, self.eos_ids, prompt.stops, healed=prompt.healing is not None),
            cache=RaggedKVCache(self.model.config.num_hidden_layers, 1, self.device, capacity),
            generator=torch.Generator(self.device).manual_seed(seed),
            uniforms=PositionUniforms(seed),
            deadline=started + (request.budget_s if not request.deadline.after_prompt else float("inf")),
            started=started,
            stats=GenerationStats(prompt_tokens=len(prompt.ids)),
            active=list(range(request.k)),
        )

    def _check_room(self, request: GenerationRequest, prompt_tokens: int) -> None:
        """Refuse a prompt that is empty or leaves the context no room for max_new_tokens and a draft."""
        room = self.context_limit - self._new_room(request) - self.settings.controller.max_length - 1
        if not prompt_tokens or prompt_tokens > room:
            raise InvalidRequest(
                f"prompt is {prompt_tokens} tokens: with max_new_tokens={request.max_new_tokens} "
                f"it must be 1..{max(room, 0)} tokens for this model's context of "
                f"{self.context_limit}"
            )

    @staticmethod
    def _new_room(request: GenerationRequest) -> int:
        """The positions a row may add to the prompt: its tokens, and its tail's where it has one."""
        return request.max_new_tokens + (TAIL_READ_TOKENS + TAIL_TOKENS if request.tail else 0)

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
                run.prompt.ids,
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
            run.prompt.ids,
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
        if run.prompt.not_first is not None:  # a chat-form answer does not end at once
            allowed = logits.index_fill(-1, run.prompt.not_first, float("-inf"))
        if run.prompt.healing is not None:  # the first token finishes the typed word
            allowed = allowed.masked_fill(~run.prompt.healing.allowed, float("-inf"))
        decode = functools.partial(run.decode, self._decode)
        first_tokens = _target_samples(run.request, allowed, rows, first_uniform)
        first_logprobs = token_logprobs(logits, first_tokens)
        for row_index, row in enumerate(run.rows):
            run.rules.extend(row, [int(first_tokens[row_index])], [float(first_logprobs[row_index])], decode)
        run.stats.generated_tokens = sum(len(r.token_ids) for r in run.rows)
        self._drop_finished(run)

    def _round(self, run: _Run, drafters: dict[str, Drafter], controller: DraftController) -> None:
        """One draft/verify round over the active rows."""
        batch = len(run.active)
        step_started = time.perf_counter()
        context = DraftContext(
            run.prompt.ids,
            [r.history for r in run.rows],
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
        forced = forced_draft(run.rows, run.active, self.device)  # tails' texts to read: taken whole
        if forced is not None:
            draft = merge_drafts(forced, draft)
            step.proposed = [0 if n else p for n, p in zip(forced.lengths.tolist(), step.proposed)]
        # 2-3. verify every row's draft in one target forward and accept exactly; 4. commit what was accepted
        verified = self._verify(run, draft, step, forced)
        self._commit(run, verified)
        self._start_tails(run)
        # 5. adapt: costs and acceptance feed the next plan; the step's cost is all of it but the draft model's work
        step.accepted = verified.n_accepted.tolist()
        if forced is not None:  # read, not drafted: the controller learns nothing from them
            step.accepted = [0 if n else a for n, a in zip(forced.lengths.tolist(), step.accepted)]
        step.verify_s = time.perf_counter() - step_started - step.draft_s - step.setup_s
        controller.observe(step)
        self._count(run, step)
        run.round_number += 1
        self._drop_finished(run)

    def _verify(self, run: _Run, draft: Draft, step: StepRecord, forced: Draft | None = None) -> _Verified:
        """[pending, draft tokens] of every row in one target forward, each row only its own tokens; then exact
        speculative sampling, each row its own number of tokens, with samples only at the N verified positions
        (sampling.draw: the nucleus's tokens, no [N, V] distributions unless the draft brings distributions to weigh
        them against). The rows `forced` reads
        (tails' texts) take their draft whole and the target's sample after it."""
        batch = len(run.active)
        draft_lengths = draft.lengths.to(self.device)
        width = int(draft_lengths.max())  # no wider than the longest row's draft
        draft_tokens = draft.tokens[:, :width].to(self.device)  # [B, K]
        draft_probs = None if draft.probs is None else draft.probs[:, :width]
        pending = torch.tensor([run.rows[r].history[-1] for r in run.active], device=self.device)  # [B]
        verify_input = torch.cat([pending[:, None], draft_tokens], dim=1)  # [B, K+1]
        logits, packed, step.token_rows = forward_ragged(self.model, run.cache, verify_input, draft_lengths + 1)
        rows = [run.active[b] for b in packed.rows.tolist()]
        positions = [len(run.rows[r].history) for r in run.active]  # where each row's draft begins
        sample_uniform = run.uniforms.at(run.active, positions, width + 1)  # [B, K+1]
        numbers = packed.pack(sample_uniform.to(self.device))  # [N]
        target_probs = None  # [N, V] where the draft has distributions to weigh against them
        if draft_probs is None:
            target_samples = _target_samples(run.request, logits, rows, numbers)  # [N]
        else:
            target_probs = _target_probs(run.request, logits, rows)
            target_samples = inverse_cdf(target_probs, numbers)
        n_accepted, next_tokens = speculative_accept(
            draft_tokens,
            draft_probs,
            None if target_probs is None else packed.pad(target_probs, batch, width + 1),
            draft_lengths,
            run.generator,
            sample_uniform,
            packed.pad(target_samples, batch, width + 1),
        )  # [B], [B]
        if forced is not None:
            taken = forced.lengths.to(self.device) > 0  # [B]
            after = packed.pad(target_samples, batch, width + 1)[torch.arange(batch), draft_lengths]  # [B]
            n_accepted = torch.where(taken, draft_lengths, n_accepted)
            next_tokens = torch.where(taken, after, next_tokens)
        return _Verified(draft_tokens, logits, packed, n_accepted, next_tokens)

    def _commit(self, run: _Run, verified: _Verified) -> None:
        """The cache keeps [pending, accepted drafts]; each row gets its accepted tokens and the next one (the next
        pending token), with their log-probabilities."""
        n_accepted, next_tokens, packed = verified.n_accepted, verified.next_tokens, verified.packed
        run.cache.commit(n_accepted + 1)
        committed = torch.cat([verified.draft_tokens, next_tokens[:, None]], dim=1)  # [B, K+1]
        committed[torch.arange(len(run.active)), n_accepted] = next_tokens
        kept = packed.offsets <= n_accepted[packed.rows]  # [N]: the positions each row commits
        kept_logprobs = token_logprobs(verified.logits[kept], packed.pack(committed)[kept])  # [sum(n + 1)]
        for i, (row_index, logprobs) in enumerate(zip(run.active, kept_logprobs.split((n_accepted + 1).tolist()))):
            row, tokens = run.rows[row_index], committed[i, : len(logprobs)].tolist()
            if row.tail is not None:
                row.tail.queue = []  # read in this round
                run.rules.extend_tail(row.tail, tokens, self._decode)
                continue
            run.rules.extend(row, tokens, logprobs.tolist(), functools.partial(run.decode, self._decode))

    def _start_tails(self, run: _Run) -> None:
        """Where the request asks for tails: each row that ended by itself in this round begins its tail (its cache cut
        back to the tokens the tail goes on from; tails.start_tail)."""
        if not run.request.tail or run.line_marks is not None:  # past an editor's deadline no new line is begun
            return
        rows = [run.rows[r] for r in run.active]
        starting = [b for b, row in enumerate(rows) if row.finish_reason == FINISH_STOP and row.tail is None]
        if not starting:
            return
        lengths = run.cache.lengths.clone()
        decode = functools.partial(run.decode, self._decode)
        for b in starting:
            row = rows[b]
            cached = int(lengths[b]) - len(run.prompt.ids)
            row.tail = start_tail(row, run.request.tail, cached, decode, self.prompts.encode)
            if row.tail is not None:
                lengths[b] = len(run.prompt.ids) + row.tail.kept
        run.cache.set_lengths(lengths)

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
            if row.tail is not None:
                continue  # a tail ends with its line anyway
            end = line_end_after(row.text, run.line_marks[r])
            if end is not None:
                StopRules.end_row_at(row, end, functools.partial(run.decode, self._decode))
                row.finish_reason = FINISH_BUDGET
        self._drop_finished(run)

    def _drop_finished(self, run: _Run) -> None:
        """Finished rows leave the batch (a row writing its tail stays): their cache rows are dropped so they stop
        costing compute."""
        keep = [i for i, r in enumerate(run.active) if run.rows[r].growing]
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
    greedy = _greedy_positions(request, rows, logits.device)
    if greedy is not None:
        probs[greedy] = warp_probs(logits[greedy], 0.0, request.top_p)
    return probs


def _target_samples(
    request: GenerationRequest, logits: torch.Tensor, rows: list[int], numbers: torch.Tensor
) -> torch.Tensor:
    """The target's tokens [N] drawn with `numbers` [N] from logits [N, V] (the i-th of original row rows[i]):
    inverse_cdf(_target_probs(request, logits, rows), numbers), without the [N, V] distributions."""
    numbers = numbers.to(logits.device)
    greedy = _greedy_positions(request, rows, logits.device)
    if greedy is None:
        return draw(logits, request.temperature, request.top_p, numbers)
    tokens = torch.empty(len(rows), dtype=torch.long, device=logits.device)  # [N]
    tokens[greedy] = draw(logits[greedy], 0.0, request.top_p, numbers[greedy])
    if not bool(greedy.all()):
        tokens[~greedy] = draw(logits[~greedy], request.temperature, request.top_p, numbers[~greedy])
    return tokens


def _greedy_positions(request: GenerationRequest, rows: list[int], device) -> torch.Tensor | None:
    """[N] which positions are row 0's where the request asks for it greedy among sampled rows; None if none."""
    if not (request.greedy_first and request.temperature > 0 and 0 in rows):
        return None
    return torch.tensor([r == 0 for r in rows], device=device)


def _check_settings(settings: EngineSettings, draft_model) -> None:
    """Refuse settings the engine cannot run: an unknown drafter or acceptance rule, a draft model asked for but not
    given, a prefill chunk below one token."""
    if settings.drafter not in DRAFTER_CHOICES:
        raise ValueError(f"drafter={settings.drafter!r} is unknown: choose one of {', '.join(DRAFTER_CHOICES)}")
    if settings.drafter == "model" and draft_model is None:
        raise InvalidSetting(
            "drafter='model' needs a draft model: give the engine one (draft_model) or choose another drafter",
            settings={"draft_model": "draft_model"},
        )
    if not isinstance(settings.prefill_chunk, int) or settings.prefill_chunk < 1:
        raise ValueError(f"prefill_chunk={settings.prefill_chunk!r} is out of range: it must be an integer >= 1")
    if settings.acceptance not in ACCEPTANCE_CHOICES:
        raise ValueError(
            f"acceptance={settings.acceptance!r} is unknown: choose one of {', '.join(ACCEPTANCE_CHOICES)}"
        )


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
