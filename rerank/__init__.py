"""Reranking of candidate completions by pairwise consistency, log-probabilities and static findings."""

from rerank.agreement import dual_agreement
from rerank.evidence import ROLES, TIE_BREAK, TIER, Evidence
from rerank.rank import RankedCandidate, duplicate_key, group_duplicates, rank, rank_with_similarity
from rerank.scoring import generalized_self_consistency
from rerank.settings import SCORERS, SIMILARITIES, RankSettings
from rerank.similarity import (
    jaccard_similarity,
    make_vectorizer,
    ngram_overlap_similarity,
    pairwise_similarity,
    similarity_matrix,
    token_probabilities,
    vectorize,
)
from rerank.tokens import code_token_spans, code_tokens, regex_tokens

__all__ = [
    "Evidence",
    "ROLES",
    "RankSettings",
    "TIER",
    "TIE_BREAK",
    "RankedCandidate",
    "SCORERS",
    "SIMILARITIES",
    "code_token_spans",
    "code_tokens",
    "dual_agreement",
    "duplicate_key",
    "generalized_self_consistency",
    "group_duplicates",
    "jaccard_similarity",
    "make_vectorizer",
    "ngram_overlap_similarity",
    "pairwise_similarity",
    "rank",
    "rank_with_similarity",
    "regex_tokens",
    "similarity_matrix",
    "token_probabilities",
    "vectorize",
]
