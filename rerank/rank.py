"""`rank`: candidates in, distinct candidates out, best first, each with the breakdown of its score."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from rerank.evidence import TIE_BREAK, TIER, Evidence
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
    draw - static_penalty for random. The evidence given to `rank` orders first, piece by piece in its order (a
    TIER piece before the static demotion and the score, a TIE_BREAK piece among equal scores): the user's checks
    passed, say, whatever the score; a piece on which all candidates are equal moves nothing. Unparsable candidates
    rank below all parsing ones (unless all fail) whatever their score. Equal scores are ordered by the higher mean
    token log-probability, then by the earlier row.
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
    evidence: dict[str, float | None] = field(default_factory=dict)  # each piece's value for it, in the given order
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
    evidence: Sequence[Evidence] = (),
) -> list[RankedCandidate]:
    """Order candidates best first (see `rank_with_similarity`, which also returns the similarity matrix)."""
    return rank_with_similarity(texts, token_logprobs, reports, settings, token_texts, evidence)[0]


@dataclass
class _Groups:
    """The distinct texts of one ranking: each group's rows, its head (first row) and copies."""

    rows: list[list[int]]
    heads: list[int]
    counts: np.ndarray  # (n_groups,)

    @staticmethod
    def of(texts: list[str]) -> _Groups:
        rows = group_duplicates(texts)
        return _Groups(rows, [group[0] for group in rows], np.array([len(g) for g in rows], dtype=np.float64))


def rank_with_similarity(
    texts: list[str],
    token_logprobs: list[list[float]] | None = None,
    reports: list | None = None,
    settings: RankSettings = RankSettings(),
    token_texts: list[list[str]] | None = None,
    evidence: Sequence[Evidence] = (),
) -> tuple[list[RankedCandidate], np.ndarray]:
    """Order candidates best first by the evidence, then consistency (and log-probabilities, and static findings).

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
    evidence : sequence of Evidence, each with one value per candidate (or None: not gathered)
        Compared in order, higher first: TIER pieces before the static demotion and the score (the user's checks
        passed, then dual agreement on tests the model wrote, say), TIE_BREAK pieces among equal scores. Each
        candidate reports every piece's value under its name.

    Returns
    -------
    ranked : list of RankedCandidate, length n_distinct
    similarities : ndarray of shape (n_distinct, n_distinct)
        Pairwise similarity of the distinct candidates in rank order, from the vectors the ranking used.
    """
    settings.validate()
    _check_inputs(texts, token_logprobs, reports, token_texts, settings, evidence)
    if not texts:
        return [], np.zeros((0, 0))
    groups = _Groups.of(texts)
    # consistency: GSC over distinct texts, copies weighted by their count
    similarities = similarity_matrix(
        [texts[i] for i in groups.heads],
        settings,  # (n_groups, n_groups)
        [token_logprobs[i] for i in groups.heads] if token_logprobs else None,
        [token_texts[i] for i in groups.heads] if token_texts else None,
    )
    scores = _Scores.of(
        groups, generalized_self_consistency(similarities, groups.counts), token_logprobs, reports, settings
    )
    # order: the evidence's tiers, the demotion, the score, the evidence's tie-breaks, then the model's own
    # preference (the higher mean log-probability), then the earlier row
    order = _order(groups.heads, evidence, scores.demoted, scores.score, scores.means)
    ranked = [_ranked(place + 1, g, texts, groups, scores, evidence, settings.label()) for place, g in enumerate(order)]
    return ranked, similarities[np.ix_(order, order)]


@dataclass
class _Scores:
    """Each group's score and its parts (arrays of shape (n_groups,), lists of n_groups)."""

    consistency: np.ndarray
    means: list[float | None]  # mean token log-probability over the group's copies, when given
    logprob_term: np.ndarray
    penalty: np.ndarray
    demoted: list[bool]
    score: np.ndarray
    reports: list  # the head's static report, or None

    @staticmethod
    def of(groups: _Groups, consistency, token_logprobs, reports, settings: RankSettings) -> _Scores:
        """The log-probability term and base score (see RankedCandidate), then the static policy's share."""
        means = [
            float(np.mean([mean_logprob(token_logprobs[i]) for i in group])) if token_logprobs else None
            for group in groups.rows
        ]
        n_texts = int(groups.counts.sum())
        logprob_term, base = _base_scores(settings, groups.rows, consistency, means, token_logprobs, n_texts)
        group_reports = [reports[i] if reports else None for i in groups.heads]
        penalty, demoted = _static_policy(base, group_reports, settings)
        return _Scores(consistency, means, logprob_term, penalty, demoted, base - penalty, group_reports)


def _ranked(place: int, g: int, texts, groups: _Groups, scores: _Scores, evidence, scorer: str) -> RankedCandidate:
    """Group g at 1-based `place`, with its score's parts and the evidence's values."""
    report = scores.reports[g]
    return RankedCandidate(
        rank=place,
        text=texts[groups.heads[g]],
        indices=list(groups.rows[g]),
        count=len(groups.rows[g]),
        consistency=float(scores.consistency[g]),
        logprob_term=float(scores.logprob_term[g]),
        static_penalty=float(scores.penalty[g]),
        score=float(scores.score[g]),
        mean_logprob=scores.means[g],
        parses=None if report is None else bool(getattr(report, "parses", True)),
        errors=finding_count(report, "errors") if report is not None else 0,
        warnings=finding_count(report, "warnings") if report is not None else 0,
        demoted=scores.demoted[g],
        evidence={piece.name: piece.value(groups.heads[g]) for piece in evidence},
        scorer=scorer,
    )


def _static_policy(base: np.ndarray, group_reports: list, settings: RankSettings) -> tuple[np.ndarray, list[bool]]:
    """(penalty (n_groups,), demoted per group): the findings' share of the largest score, and which groups move
    below the others (unparsable or empty; none where all would)."""
    finite = base[np.isfinite(base)]
    scale = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
    penalty = np.array([static_penalty_fraction(r, settings) * scale for r in group_reports])
    demoted = [
        (settings.unparsable_to_bottom and r is not None and getattr(r, "parses", True) is False)
        or (settings.empty_to_bottom and _is_empty(r))
        for r in group_reports
    ]
    if all(demoted):
        demoted = [False] * len(group_reports)  # all fail: the policy cannot tell them apart
    return penalty, demoted


def _order(heads: list[int], evidence: Sequence[Evidence], demoted, score, means) -> list[int]:
    """Group indices best first (see RankedCandidate)."""
    tiers = [piece for piece in evidence if piece.role == TIER]
    ties = [piece for piece in evidence if piece.role == TIE_BREAK]
    return sorted(
        range(len(heads)),
        key=lambda g: (
            *(-piece.order_value(heads[g]) for piece in tiers),
            demoted[g],
            -_sortable(score[g]),
            *(-piece.order_value(heads[g]) for piece in ties),
            -_sortable(means[g] if means[g] is not None else math.nan),
            heads[g],
        ),
    )


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


def _check_inputs(texts, token_logprobs, reports, token_texts, settings, evidence) -> None:
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a list of strings (candidate continuations)")
    for name, value in (("token_logprobs", token_logprobs), ("reports", reports), ("token_texts", token_texts)):
        if value is not None and len(value) != len(texts):
            raise ValueError(f"{name} has {len(value)} entries for {len(texts)} texts: give one per text")
    names = [piece.name for piece in evidence]
    if len(set(names)) != len(names):
        raise ValueError(f"evidence names {names} repeat: give each piece its own name")
    for piece in evidence:
        piece.validate(len(texts))
    if token_logprobs is None and settings.uses_logprobs:
        raise ValueError(f"scorer={settings.scorer!r} needs token_logprobs; without them use scorer='gsc' or 'random'")
