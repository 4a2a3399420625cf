"""The settings of a ranking: which scorer, which similarity, which features, which static policy."""
from __future__ import annotations

from dataclasses import dataclass

SCORERS = ("gsc", "wucs", "consensus_wucs", "mean_logprob", "sum_logprob", "random")
NEEDS_LOGPROBS = ("wucs", "consensus_wucs", "mean_logprob", "sum_logprob")   # the scorers that read token log-probs
SIMILARITIES = ("ngram_overlap", "cosine", "jaccard")
MAX_NGRAM = 4


@dataclass(frozen=True)
class RankSettings:
    """How `rank` orders candidates; every field is named in the breakdown the UI shows.

    Defaults: generalized self-consistency over unigram overlap of binary code-token vectors (which
    code tokens two candidates share), the plain form of Jain et al. (2024); it needs no
    log-probabilities, so it works for any engine. Chosen on HumanEval problems 0-110 with the bundled
    1.5B (k=8, T=0.8, static policy on) as the best of 24 rankers, then confirmed on problems 111-163,
    which took no part in the choice: Pass@First 50.9% there against 47.2% for unigram+bigram, 45.3%
    for mean log-probability and 34.0% for greedy (python -m benchmarks.eval_humaneval --static
    --start 111 --samples benchmarks/data/humaneval_qwen2.5-coder-1.5b_k8_t0.8.jsonl.gz).
    """

    scorer: str = "gsc"                  # one of SCORERS; gsc/wucs/consensus_wucs use the similarity below
    similarity: str = "ngram_overlap"    # one of SIMILARITIES; ngram_overlap is the paper's v_i . v_j / |V|
    ngram_range: tuple[int, int] = (1, 1)  # smallest and largest n of the code-token n-grams, within 1..4
    binary: bool = True                  # presence (True) or occurrence counts (False) of each n-gram
    seed: int = 0                        # seeds the "random" scorer (and nothing else)
    # Static policy (reports from static_eval). Penalties are fractions of the largest |score| of
    # the call, so they mean the same for every scorer and similarity.
    unparsable_to_bottom: bool = True    # candidates that do not parse rank below all that do, unless all fail
    empty_to_bottom: bool = True         # so do empty implementations (only pass / ... / docstring / raise
                                         # NotImplementedError): they cannot be the answer however many agree
    error_penalty: float = 0.25          # per error-level finding: usually a failure when run, but linters err
    warning_penalty: float = 0.02        # per warning (unused name...): rarely wrong code, so a tie-breaker
    type_penalty: float = 0.1            # per type-checker error (mypy): often a failure, but inference errs
    incomplete_penalty: float = 0.25     # the report says the code is cut off (complete=False)

    def validate(self) -> None:
        """Raise ValueError naming the bad value and the allowed range."""
        if self.scorer not in SCORERS:
            raise ValueError(f"scorer={self.scorer!r} is not known: use one of {', '.join(SCORERS)}")
        if self.similarity not in SIMILARITIES:
            raise ValueError(f"similarity={self.similarity!r} is not known: use one of {', '.join(SIMILARITIES)}")
        low, high = self.ngram_range
        if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high <= MAX_NGRAM):
            raise ValueError(f"ngram_range={self.ngram_range!r} is out of range: it must be (low, high) "
                             f"with 1 <= low <= high <= {MAX_NGRAM}")
        for name in ("error_penalty", "warning_penalty", "type_penalty", "incomplete_penalty"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{name}={value!r} is out of range: it must be a number >= 0")

    @property
    def uses_logprobs(self) -> bool:
        """Whether the scorer reads the candidates' token log-probabilities (NEEDS_LOGPROBS)."""
        return self.scorer in NEEDS_LOGPROBS

    def label(self) -> str:
        """A short name for tables, e.g. 'gsc/ngram_overlap/1-1/bin'."""
        if self.scorer in ("mean_logprob", "sum_logprob", "random"):
            return self.scorer
        low, high = self.ngram_range
        kind = "bin" if self.binary else "count"
        return f"{self.scorer}/{self.similarity}/{low}-{high}/{kind}"
