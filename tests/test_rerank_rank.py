"""`rank`: majority wins, duplicates are counted, the static policy, the breakdown, the baselines."""

import json
from dataclasses import dataclass, field

import numpy as np
import pytest

from rerank import SCORERS, RankedCandidate, RankSettings, rank


@dataclass
class Finding:
    """Stand-in for static_eval.Finding (same fields)."""

    kind: str
    symbol: str = ""
    line: int = 1
    column: int = 0
    message: str = ""
    severity: str = "error"


@dataclass
class Report:
    """Stand-in for static_eval.CandidateReport (same fields and properties)."""

    parses: bool = True
    complete: bool = True
    prompt_parses: bool = False
    findings: list = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def errors(self):
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self):
        return [f for f in self.findings if f.severity == "warning"]


MAJORITY = [  # three near-duplicates of the right answer, two different wrong ones
    "    return sorted(set(xs))\n",
    "    return sorted(set(xs))  # unique\n",
    "    result = sorted(set(xs))\n    return result\n",
    "    return xs[::-1]\n",
    "    return [x for x in xs if x > 0]\n",
]


@pytest.mark.parametrize("similarity", ["ngram_overlap", "cosine", "jaccard"])
@pytest.mark.parametrize("scorer", ["gsc", "wucs", "consensus_wucs"])
def test_consistency_picks_the_majority_answer(scorer, similarity):
    logprobs = [[-0.5] * 8 for _ in MAJORITY]
    ranked = rank(list(MAJORITY), logprobs, settings=RankSettings(scorer=scorer, similarity=similarity))
    assert "sorted(set(xs))" in ranked[0].text
    assert "sorted(set(xs))" in ranked[1].text or "sorted(set(xs))" in ranked[2].text


def test_identical_candidates_are_shown_once_with_a_count_that_votes():
    texts = [
        "    return a - b\n",
        "    return a + b\n",
        "    return a - b\n",
        "    return a + b   \n",
        "    return a + b\n",
    ]
    ranked = rank(texts)
    assert [c.count for c in ranked] == [3, 2]
    assert ranked[0].indices == [1, 3, 4] and ranked[1].indices == [0, 2]
    assert sum(c.count for c in ranked) == len(texts)


def test_unparsable_go_to_the_bottom_unless_all_fail():
    texts = list(MAJORITY)
    reports = [Report(parses=False), Report(), Report(), Report(), Report()]
    ranked = rank(texts, reports=reports)
    assert ranked[-1].indices == [0] and ranked[-1].demoted and ranked[-1].parses is False
    all_fail = rank(texts, reports=[Report(parses=False) for _ in texts])
    assert not any(c.demoted for c in all_fail)
    assert [c.indices for c in all_fail] == [c.indices for c in rank(texts)]


def test_an_empty_implementation_never_wins_however_many_agree():
    texts = ["    pass\n", "    pass\n", "    pass  # TODO\n", "    return sorted(xs)\n", "    return xs[::-1]\n"]
    empty = Report(findings=[Finding("empty-implementation")])
    reports = [empty, empty, empty, Report(), Report()]
    ranked = rank(texts, reports=reports)
    assert "pass" not in ranked[0].text and "pass" not in ranked[1].text
    assert all(c.demoted for c in ranked if "pass" in c.text)
    assert not any(c.demoted for c in rank(texts, reports=[empty] * 5))  # all empty: nothing to prefer


def test_errors_cost_more_than_warnings():
    texts = ["    return a + b\n", "    return a + b + 0\n"]  # near-equal consistency
    error, warning = Finding("undefined-name"), Finding("unused-variable", severity="warning")
    ranked = rank(texts, reports=[Report(findings=[error]), Report(findings=[warning])])
    assert ranked[0].indices == [1] and ranked[0].warnings == 1 and ranked[1].errors == 1
    assert ranked[1].static_penalty > ranked[0].static_penalty > 0
    swapped = rank(texts, reports=[Report(findings=[warning]), Report(findings=[error])])
    assert swapped[0].indices == [0]


def test_policy_weights_are_settings():
    texts = ["    return a + b\n", "    return a + b + 0\n"]
    reports = [Report(findings=[Finding("undefined-name")]), Report()]
    off = RankSettings(error_penalty=0.0)
    assert rank(texts, reports=reports, settings=off)[0].static_penalty == 0.0
    assert rank(texts, reports=[Report(complete=False), Report()])[0].indices == [1]


def test_every_candidate_carries_its_breakdown_as_json():
    logprobs = [[-0.1] * 6, [-0.2] * 6, [-2.0] * 6, [-0.3] * 6, [-0.4] * 6]
    for scorer in SCORERS:
        ranked = rank(list(MAJORITY), logprobs, settings=RankSettings(scorer=scorer))
        assert [c.rank for c in ranked] == list(range(1, len(ranked) + 1))
        for cand in ranked:
            assert isinstance(cand, RankedCandidate)
            data = json.loads(json.dumps(cand.as_dict()))
            for key in ("rank", "text", "indices", "count", "consistency", "logprob_term", "static_penalty", "score"):
                assert key in data
        scores = [c.score for c in ranked]
        assert scores == sorted(scores, reverse=True)


def test_consensus_wucs_multiplies_by_mean_token_probability():
    logprobs = [[-0.1] * 6, [-0.2] * 6, [-2.0] * 6, [-0.3] * 6, [-0.4] * 6]
    ranked = rank(list(MAJORITY), logprobs, settings=RankSettings(scorer="consensus_wucs"))
    for cand in ranked:
        assert cand.logprob_term == pytest.approx(np.exp(cand.mean_logprob))
        assert cand.score == pytest.approx(cand.consistency * cand.logprob_term)


def test_logprob_baselines_and_seeded_random():
    texts = ["    return 1\n", "    return 2\n", "    return 3\n"]
    logprobs = [[-1.0, -1.0], [-0.1, -0.1, -0.1, -0.1], [-0.5]]
    assert rank(texts, logprobs, settings=RankSettings(scorer="mean_logprob"))[0].indices == [1]
    assert rank(texts, logprobs, settings=RankSettings(scorer="sum_logprob"))[0].indices == [1]
    runs = [[c.indices for c in rank(texts, settings=RankSettings(scorer="random", seed=s))] for s in range(8)]
    assert runs[0] == [c.indices for c in rank(texts, settings=RankSettings(scorer="random", seed=0))]
    assert len({tuple(map(tuple, r)) for r in runs}) > 1


def test_bad_input_names_the_value():
    with pytest.raises(ValueError, match="token_logprobs"):
        rank(["x"], settings=RankSettings(scorer="wucs"))
    with pytest.raises(ValueError, match="scorer='best'"):
        rank(["x"], settings=RankSettings(scorer="best"))
    with pytest.raises(ValueError, match="ngram_range"):
        rank(["x"], settings=RankSettings(ngram_range=(1, 5)))
    with pytest.raises(ValueError, match="reports has 1 entries for 2 texts"):
        rank(["x", "y"], reports=[Report()])
    assert rank([]) == []
    assert rank(["    return 1\n"])[0].consistency == 0.0


def test_equal_scores_rank_the_likelier_candidate_first():
    texts = ["    return a + b\n", "    return b + a\n"]  # the same tokens: equal consistency
    ranked = rank(texts, token_logprobs=[[-2.0, -2.0], [-0.1, -0.1]])
    assert ranked[0].score == ranked[1].score
    assert ranked[0].indices == [1]  # higher mean log-probability first, not the earlier row
    ranked = rank(texts, token_logprobs=[[-0.1, -0.1], [-2.0, -2.0]])
    assert ranked[0].indices == [0]
