"""Pairwise similarities on hand-made candidates: identical, disjoint, partly shared."""

import numpy as np
import pytest

from rerank import (
    SIMILARITIES,
    RankSettings,
    generalized_self_consistency,
    jaccard_similarity,
    ngram_overlap_similarity,
    similarity_matrix,
    token_probabilities,
    vectorize,
)

SAME = "    return a + b\n"
SAME_REFORMATTED = "    return a+b  # sum\n"
DISJOINT = "    while True:\n        pass\n"
PARTLY = "    return a - b\n"


@pytest.mark.parametrize("similarity", SIMILARITIES)
@pytest.mark.parametrize("binary", [True, False])
def test_identical_is_one_and_disjoint_is_zero(similarity, binary):
    settings = RankSettings(similarity=similarity, binary=binary, ngram_range=(1, 4))
    assert similarity_matrix([SAME, SAME_REFORMATTED], settings)[0, 1] == pytest.approx(1.0)
    assert similarity_matrix([SAME, DISJOINT], settings)[0, 1] == pytest.approx(0.0)


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_partly_shared_is_in_between_and_ordered(similarity):
    settings = RankSettings(similarity=similarity)
    sim = similarity_matrix([SAME, SAME, PARTLY, DISJOINT], settings)
    assert sim.shape == (4, 4)
    assert np.allclose(sim, sim.T)
    assert 0 < sim[0, 2] < sim[0, 1]
    assert sim[0, 3] == pytest.approx(0.0)


def test_pairwise_functions_take_x_and_optional_y():
    X = vectorize([SAME, PARTLY, DISJOINT])
    for fn in (ngram_overlap_similarity, jaccard_similarity):
        assert fn(X).shape == (3, 3)
        assert fn(X[:1], X).shape == (1, 3)
        assert np.allclose(fn(X[:1], X), fn(X)[:1])


def test_jaccard_matches_set_jaccard_on_binary_vectors():
    # unigrams: {return, a, +, b} vs {return, a, -, b}: 3 shared of 5
    settings = RankSettings(similarity="jaccard", ngram_range=(1, 1))
    assert similarity_matrix([SAME, PARTLY], settings)[0, 1] == pytest.approx(3 / 5)


def test_overlap_is_the_paper_formula():
    # unigrams over V = {return, a, +, b, -}: 3 shared / |V| = 5
    settings = RankSettings(similarity="ngram_overlap", ngram_range=(1, 1))
    assert similarity_matrix([SAME, PARTLY], settings)[0, 1] == pytest.approx(3 / 5)


def test_empty_candidates_are_similar_to_nothing():
    sim = similarity_matrix(["", SAME], RankSettings(similarity="cosine"))
    assert np.all(np.isfinite(sim)) and sim[0, 1] == 0


def test_gsc_is_mean_similarity_to_the_others_and_copies_vote():
    sim = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 1.0]])
    assert np.allclose(generalized_self_consistency(sim), [0.25, 0.35, 0.1])
    # group 0 stands for 3 copies: each copy has 2 identical others and 1 of group 1 and 1 of group 2
    assert generalized_self_consistency(sim, [3, 1, 1])[0] == pytest.approx((2 * 1.0 + 0.5 + 0.0) / 4)
    assert np.all(generalized_self_consistency(np.ones((1, 1)), [1]) == 0)


def test_token_probabilities_exact_with_token_texts_and_even_without():
    text = "return a + b"
    logprobs = np.log([0.9, 0.5, 0.25, 0.1]).tolist()
    exact = token_probabilities(text, logprobs, ["return", " a", " +", " b"])
    assert np.allclose(exact, [0.9, 0.5, 0.25, 0.1])
    even = token_probabilities(text, logprobs)
    assert even.shape == (4,) and np.all((even > 0) & (even <= 1))
    assert np.allclose(token_probabilities(text, []), 1.0)


def test_weighted_vectors_follow_the_token_probabilities():
    settings = RankSettings(scorer="wucs", similarity="cosine", ngram_range=(1, 1))
    pieces = [["    return", " a", " +", " b\n"], ["    return", " a", " -", " b\n"]]
    confident = [np.log([0.9] * 4).tolist()] * 2
    sim = similarity_matrix([SAME, PARTLY], settings, confident, pieces)
    unsure_minus = [np.log([0.9] * 4).tolist(), np.log([0.9, 0.9, 0.01, 0.9]).tolist()]
    sim_unsure = similarity_matrix([SAME, PARTLY], settings, unsure_minus, pieces)
    assert sim_unsure[0, 1] > sim[0, 1]  # the disagreeing token weighs less, so they agree more
