"""`rank`: candidates in, distinct candidates out, best first, each with the breakdown of its score."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from rerank.scoring import finding_count, generalized_self_consistency, mean_logprob, static_penalty_fraction
from rerank.settings import RankSettings
from rerank.similarity import similarity_matrix
from static_eval.findings import EMPTY_IMPLEMENTATION

EMPTY_KIND = EMPTY_IMPLEMENTATION  # the finding kind static_eval gives a body that adds nothing that runs


@dataclass
class RankedCandidate:
    """One distinct candidate text, its place, and why it is there.

    score = consistency - static_penalty for gsc and wucs; consistency * logprob_term - static_penalty
    for consensus_wucs (logprob_term = exp(mean token log-probability), the geometric-mean token
    probability); logprob_term - static_penalty for mean_logprob and sum_logprob; a seeded random
    draw - static_penalty for random. Unparsable candidates rank below all parsing ones (unless all fail)
    whatever their score. Given the checks each candidate passed (the user's own examples, run), candidates that
    pass more come first whatever their score: a check all pass or all fail moves nothing. Equal scores are ordered
    by the higher mean token log-probability, then by the earlier row.
    """

    rank: int  # 1-based place, best first
    text: str  # the text (of the first copy)
    indices: list[int]  # original positions of every identical copy
    count: int  # number of copies: evidence, each copy votes in GSC
    consistency: float  # GSC: mean similarity to all other candidates (weighted for wucs)
    logprob_term: float  # the log-probability term the scorer used (0 when it uses none)
    static_penalty: float  # subtracted by the static policy (errors, warnings, cut off)
    score: float  # final score (ordering within a parse tier)
    mean_logprob: float | None = None  # mean token log-probability, when given
    parses: bool | None = None  # from the static report; None without one
    errors: int = 0  # error-level findings
    warnings: int = 0  # warning-level findings
    demoted: bool = False  # moved below the others: it does not parse, or it is an empty implementation
    checks_passed: int | None = None  # the user's examples it passed (they order before the score); None: no checks
    agreement: float | None = None  # dual agreement on tests the model wrote (after the checks); None: none
    scorer: str = ""  # RankSettings.label() of the ranking
    extras: dict = field(default_factory=dict)  # room for callers' annotations

    def as_dict(self) -> dict:
        """JSON-serialisable fields; non-finite numbers become None."""
        return {key: _finite_or_none(value) for key, value in asdict(self).items()}


def _finite_or_none(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def duplicate_key(text: str) -> str:
    """What makes two candidates 'identical': the same text up to trailing whitespace on lines and at the end.

    Comments still tell candidates apart (the user sees them), but they do not count in similarity.
    """
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def group_duplicates(texts: list[str]) -> list[list[int]]:
    """Indices of identical candidates, grouped, groups in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for index, text in enumerate(texts):
        groups.setdefault(duplicate_key(text), []).append(index)
    return list(groups.values())


def rank(
    texts: list[str],
    token_logprobs: list[list[float]] | None = None,
    reports: list | None = None,
    settings: RankSettings = RankSettings(),
    token_texts: list[list[str]] | None = None,
    check_passes: list[int] | None = None,
    agreement: list[float] | None = None,
) -> list[RankedCandidate]:
    """Order candidates best first (see `rank_with_similarity`, which also returns the similarity matrix)."""
    return rank_with_similarity(texts, token_logprobs, reports, settings, token_texts, check_passes, agreement)[0]


def rank_with_similarity(
    texts: list[str],
    token_logprobs: list[list[float]] | None = None,
    reports: list | None = None,
    settings: RankSettings = RankSettings(),
    token_texts: list[list[str]] | None = None,
    check_passes: list[int] | None = None,
    agreement: list[float] | None = None,
) -> tuple[list[RankedCandidate], np.ndarray]:
    """Order candidates best first by consistency (and log-probabilities, and static findings).

    Parameters
    ----------
    texts : list of str, length n_candidates
        Candidate continuations of one prompt.
    token_logprobs : list of list of float, length n_candidates, optional
        Per-token log p under the model at temperature 1; needed by wucs, consensus_wucs,
        mean_logprob and sum_logprob.
    reports : list of static_eval.CandidateReport or None, length n_candidates, optional
        Read through the attributes parses, complete, errors, warnings only.
    settings : RankSettings
    token_texts : list of list of str, length n_candidates, optional
        The decoded text of each model token, to place log-probabilities exactly on code tokens
        (otherwise spread evenly over the characters; see `token_probabilities`).
    check_passes : list of int, length n_candidates, optional
        How many of the user's checks (examples run in the sandbox) each candidate passed: more passes rank
        first, the score orders within equal counts. None (no checks): the order is the score's alone.
    agreement : list of float, length n_candidates, optional
        Evidence from tests the model wrote (rerank.agreement.dual_agreement): next after the user's checks, higher
        first. None: not used.

    Returns
    -------
    ranked : list of RankedCandidate, length n_distinct
    similarities : ndarray of shape (n_distinct, n_distinct)
        Pairwise similarity of the distinct candidates in rank order, from the vectors the ranking used.
    """
    settings.validate()
    _check_inputs(texts, token_logprobs, reports, token_texts, settings, check_passes, agreement)
    if not texts:
        return [], np.zeros((0, 0))
    groups = group_duplicates(texts)
    heads = [group[0] for group in groups]
    counts = np.array([len(group) for group in groups], dtype=np.float64)  # (n_groups,)
    unique_texts = [texts[i] for i in heads]

    # 1. consistency: GSC over distinct texts, copies weighted by their count
    similarities = similarity_matrix(
        unique_texts,
        settings,  # (n_groups, n_groups)
        [token_logprobs[i] for i in heads] if token_logprobs else None,
        [token_texts[i] for i in heads] if token_texts else None,
    )
    consistency = generalized_self_consistency(similarities, counts)  # (n_groups,)

    # 2. log-probability term and base score
    means = [
        float(np.mean([mean_logprob(token_logprobs[i]) for i in group])) if token_logprobs else None for group in groups
    ]
    logprob_term, base = _base_scores(settings, groups, consistency, means, token_logprobs, len(texts))

    # 3. static policy
    group_reports = [reports[i] if reports else None for i in heads]
    finite = base[np.isfinite(base)]
    scale = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
    penalty = np.array([static_penalty_fraction(r, settings) * scale for r in group_reports])
    score = base - penalty
    parses = [None if r is None else bool(getattr(r, "parses", True)) for r in group_reports]
    demoted = [
        (settings.unparsable_to_bottom and p is False) or (settings.empty_to_bottom and _is_empty(r))
        for p, r in zip(parses, group_reports)
    ]
    if all(demoted):
        demoted = [False] * len(groups)  # all fail: the policy cannot tell them apart

    # 4. evidence: the user's checks passed come before everything the score says
    passes = [check_passes[i] if check_passes is not None else None for i in heads]
    agreed = [agreement[i] if agreement is not None else 0.0 for i in heads]

    # ties: the higher mean log-probability (the model's own preference), then the earlier row
    order = sorted(
        range(len(groups)),
        key=lambda g: (
            -(passes[g] or 0),
            -agreed[g],
            demoted[g],
            -_sortable(score[g]),
            -_sortable(means[g] if means[g] is not None else math.nan),
            heads[g],
        ),
    )
    ranked = [
        RankedCandidate(
            rank=place + 1,
            text=texts[heads[g]],
            indices=list(groups[g]),
            count=len(groups[g]),
            consistency=float(consistency[g]),
            logprob_term=float(logprob_term[g]),
            static_penalty=float(penalty[g]),
            score=float(score[g]),
            mean_logprob=means[g],
            parses=parses[g],
            errors=finding_count(group_reports[g], "errors") if group_reports[g] is not None else 0,
            warnings=finding_count(group_reports[g], "warnings") if group_reports[g] is not None else 0,
            demoted=demoted[g],
            checks_passed=passes[g],
            agreement=agreed[g] if agreement is not None else None,
            scorer=settings.label(),
        )
        for place, g in enumerate(order)
    ]
    return ranked, similarities[np.ix_(order, order)]


def _is_empty(report) -> bool:
    """The report says the candidate adds nothing that runs (static_eval's empty-implementation finding)."""
    return report is not None and any(getattr(f, "kind", None) == EMPTY_KIND for f in getattr(report, "findings", ()))


def _sortable(value: float) -> float:
    return value if not math.isnan(value) else -math.inf


def _base_scores(settings, groups, consistency, means, token_logprobs, n_candidates):
    """(logprob_term, base score) per group, both of shape (n_groups,)."""
    n_groups = len(groups)
    if settings.scorer in ("gsc", "wucs"):
        return np.zeros(n_groups), consistency
    if settings.scorer == "consensus_wucs":
        term = np.exp(np.array(means))  # geometric-mean token probability
        return term, consistency * term
    if settings.scorer == "mean_logprob":
        term = np.array(means)
        return term, term
    if settings.scorer == "sum_logprob":
        term = np.array([float(np.mean([np.sum(token_logprobs[i]) for i in group])) for group in groups])
        return term, term
    # random: one uniform draw per candidate; a group keeps its best draw, so the top group is a
    # uniformly random candidate (copies make a text proportionally more likely, as a random pick would).
    draws = np.random.default_rng(settings.seed).random(n_candidates)
    return np.zeros(n_groups), np.array([draws[group].max() for group in groups])


def _check_inputs(texts, token_logprobs, reports, token_texts, settings, check_passes, agreement=None) -> None:
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a list of strings (candidate continuations)")
    for name, value in (
        ("token_logprobs", token_logprobs),
        ("reports", reports),
        ("token_texts", token_texts),
        ("check_passes", check_passes),
        ("agreement", agreement),
    ):
        if value is not None and len(value) != len(texts):
            raise ValueError(f"{name} has {len(value)} entries for {len(texts)} texts: give one per text")
    if token_logprobs is None and settings.uses_logprobs:
        raise ValueError(f"scorer={settings.scorer!r} needs token_logprobs; without them use scorer='gsc' or 'random'")
