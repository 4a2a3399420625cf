"""Code-token n-gram vectors of candidates and pairwise similarities between them (scikit-learn style)."""

from __future__ import annotations

from functools import partial
from types import MappingProxyType

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.metrics.pairwise import check_pairwise_arrays, cosine_similarity
from sklearn.utils.extmath import safe_sparse_dot

from rerank.settings import RankSettings
from rerank.tokens import code_token_spans, code_tokens, ngrams


def _analyze(doc: str | list[str], ngram_range: tuple[int, int]) -> list[str]:
    """N-grams of a text, or of an already tokenized text (a list of code tokens)."""
    return ngrams(code_tokens(doc) if isinstance(doc, str) else doc, ngram_range)


def make_vectorizer(ngram_range: tuple[int, int] = (1, 1), binary: bool = True) -> CountVectorizer:
    """A CountVectorizer over code-token n-grams (comments and whitespace do not count).

    Its documents are texts or lists of code tokens (to tokenize once per call).
    """
    return CountVectorizer(
        analyzer=partial(_analyze, ngram_range=tuple(ngram_range)), binary=binary, lowercase=False, dtype=np.float64
    )


def vectorize(
    texts: list[str] | list[list[str]],
    settings: RankSettings = RankSettings(),
    token_weights: list[np.ndarray] | None = None,
) -> sp.csr_matrix:
    """Code-token n-gram vectors of `texts`, optionally weighted by token probabilities (WUCS).

    Parameters
    ----------
    texts : list of str or list of list of str, length n_samples
        Candidate texts, or their code tokens; the vocabulary V is every n-gram of all of them.
    settings : RankSettings
        `ngram_range` and `binary` are used.
    token_weights : list of ndarray, optional
        One array per text with a weight in [0, 1] per code token (as `code_tokens` splits it).
        An n-gram occurrence weighs the mean of its tokens' weights; a binary vector holds the mean
        weight of the n-gram's occurrences, a count vector their sum.

    Returns
    -------
    X : sparse matrix of shape (n_samples, n_features)
        n_features = |V|; at least one column, so an all-empty input still has a shape.
    """
    analyze = partial(_analyze, ngram_range=tuple(settings.ngram_range))
    texts = [code_tokens(text) if isinstance(text, str) else text for text in texts]  # tokenize once
    vectorizer = make_vectorizer(settings.ngram_range, binary=False)
    if not any(analyze(tokens) for tokens in texts):
        return sp.csr_matrix((len(texts), 1))
    counts = vectorizer.fit_transform(texts).tocsr()  # (n_samples, n_features)
    if token_weights is None:
        return (counts > 0).astype(np.float64).tocsr() if settings.binary else counts
    vocabulary = vectorizer.vocabulary_
    rows, cols, data = [], [], []
    for row, (text, weights) in enumerate(zip(texts, token_weights)):
        weights = np.asarray(weights, dtype=np.float64)
        grams = analyze(text)
        gram_weights = _ngram_weights(weights, settings.ngram_range)
        if len(grams) != len(gram_weights):
            raise ValueError(
                f"token_weights[{row}] has {len(weights)} weights, but the text has {len(text)} code tokens"
            )
        rows.extend([row] * len(grams))
        cols.extend(vocabulary[gram] for gram in grams)
        data.extend(gram_weights)
    summed = sp.csr_matrix((data, (rows, cols)), shape=counts.shape)  # duplicates are summed
    if not settings.binary:
        return summed
    return summed.multiply(counts.power(-1)).tocsr()  # mean weight per n-gram


def _ngram_weights(weights: np.ndarray, ngram_range: tuple[int, int]) -> list[float]:
    """Mean token weight of every n-gram, in the order `ngrams` lists them."""
    cumulative = np.concatenate([[0.0], np.cumsum(weights)])
    low, high = ngram_range
    out: list[float] = []
    for n in range(low, high + 1):
        if len(weights) >= n:
            out.extend(((cumulative[n:] - cumulative[:-n]) / n).tolist())
    return out


def ngram_overlap_similarity(X, Y=None) -> np.ndarray:
    """N-gram overlap of Jain et al. (2024): Sim(i, j) = v_i . v_j / |V|.

    With binary vectors this is the number of shared n-grams over the vocabulary size; |V| is
    the same for every pair of one call, so it scales but never reorders GSC scores.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples_X, n_features)
    Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features), default=None
        If None, Y = X.

    Returns
    -------
    similarities : ndarray of shape (n_samples_X, n_samples_Y)
    """
    X, Y = check_pairwise_arrays(X, Y, accept_sparse="csr")
    return safe_sparse_dot(X, Y.T, dense_output=True) / max(X.shape[1], 1)


def jaccard_similarity(X, Y=None) -> np.ndarray:
    """Weighted Jaccard (Ruzicka) similarity: sum(min(x, y)) / sum(max(x, y)); set Jaccard when binary.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples_X, n_features), non-negative
    Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features), default=None
        If None, Y = X.

    Returns
    -------
    similarities : ndarray of shape (n_samples_X, n_samples_Y)
        In [0, 1]; 0 where both vectors are empty.
    """
    X, Y = check_pairwise_arrays(X, Y, accept_sparse="csr")
    X = X.toarray() if sp.issparse(X) else X
    Y = Y.toarray() if sp.issparse(Y) else Y
    if X.min(initial=0) < 0 or Y.min(initial=0) < 0:
        raise ValueError("jaccard_similarity needs non-negative vectors (n-gram counts or weights)")
    minimum = np.stack([np.minimum(x, Y).sum(axis=1) for x in X])  # (n_samples_X, n_samples_Y)
    maximum = X.sum(axis=1)[:, None] + Y.sum(axis=1)[None, :] - minimum
    return np.divide(minimum, maximum, out=np.zeros_like(minimum), where=maximum > 0)


PAIRWISE_SIMILARITIES = MappingProxyType(
    {
        "ngram_overlap": ngram_overlap_similarity,
        "cosine": cosine_similarity,
        "jaccard": jaccard_similarity,
    }
)


def pairwise_similarity(X, Y=None, metric: str = "ngram_overlap") -> np.ndarray:
    """Dispatch to one of PAIRWISE_SIMILARITIES; returns shape (n_samples_X, n_samples_Y)."""
    if metric not in PAIRWISE_SIMILARITIES:
        raise ValueError(f"metric={metric!r} is not known: use one of {', '.join(PAIRWISE_SIMILARITIES)}")
    return np.asarray(PAIRWISE_SIMILARITIES[metric](X, Y), dtype=np.float64)


def token_probabilities(
    text: str,
    token_logprobs: list[float],
    token_texts: list[str] | None = None,
    spans: list[tuple[str, int, int]] | None = None,
) -> np.ndarray:
    """Probability of each code token of `text`, from the model's per-token log-probabilities.

    A code token weighs the mean probability of the model tokens that overlap its characters.
    The model tokens' character spans come from `token_texts` when their concatenation is the
    text (exact); otherwise the text is split evenly between the model tokens (an approximation:
    the engine's records carry token ids, not token texts).

    Parameters
    ----------
    text : str
    token_logprobs : list of float, length n_model_tokens
    token_texts : list of str, length n_model_tokens, optional
    spans : list of (str, int, int), optional
        `code_token_spans(text)`, when the caller has it already.

    Returns
    -------
    probabilities : ndarray of shape (n_code_tokens,)
        1.0 for every token when `token_logprobs` is empty.
    """
    spans = code_token_spans(text) if spans is None else spans
    probs = np.exp(np.asarray(token_logprobs, dtype=np.float64))  # (n_model_tokens,)
    if not spans or probs.size == 0:
        return np.ones(len(spans))
    if token_texts is not None and len(token_texts) == probs.size and "".join(token_texts).startswith(text):
        bounds = np.concatenate([[0], np.cumsum([len(piece) for piece in token_texts])]).astype(np.float64)
    else:
        bounds = np.linspace(0.0, len(text), probs.size + 1)
    starts, ends = bounds[:-1], bounds[1:]
    cumulative = np.concatenate([[0.0], np.cumsum(probs)])
    code_starts = np.array([start for _, start, _ in spans], dtype=np.float64)
    code_ends = np.array([end for _, _, end in spans], dtype=np.float64)
    first = np.searchsorted(ends, code_starts, side="right").clip(0, probs.size - 1)  # first model token ending after
    last = (np.searchsorted(starts, code_ends, side="left") - 1).clip(first, probs.size - 1)
    return (cumulative[last + 1] - cumulative[first]) / (last - first + 1)


def similarity_matrix(
    texts: list[str],
    settings: RankSettings = RankSettings(),
    token_logprobs: list[list[float]] | None = None,
    token_texts: list[list[str]] | None = None,
) -> np.ndarray:
    """Pairwise similarity of candidates as `rank` sees them (the UI draws it as a heatmap).

    Parameters
    ----------
    texts : list of str, length n_samples
    settings : RankSettings
        similarity, ngram_range and binary are used; with scorer "wucs" or "consensus_wucs" and
        `token_logprobs` given, vectors are weighted by token probability.
    token_logprobs : list of list of float, optional
    token_texts : list of list of str, optional
        Decoded model tokens, to place the log-probabilities exactly (see `token_probabilities`).

    Returns
    -------
    similarities : ndarray of shape (n_samples, n_samples)
    """
    settings.validate()
    if not texts:
        return np.zeros((0, 0))
    spans = [code_token_spans(text) for text in texts]
    weights = None
    if settings.scorer in ("wucs", "consensus_wucs") and token_logprobs is not None:
        pieces = token_texts if token_texts is not None else [None] * len(texts)
        weights = [
            token_probabilities(text, lp, piece, spans=sp_)
            for text, lp, piece, sp_ in zip(texts, token_logprobs, pieces, spans)
        ]
    tokens = [[token for token, _, _ in sp_] for sp_ in spans]
    return pairwise_similarity(vectorize(tokens, settings, weights), metric=settings.similarity)
