"""The evidence the pipeline gathers for the ranking, one record per kind: the name it is reported under in each
candidate's score parts, its role in the order (rerank.Evidence) and how the page says it. Every run reports every
kind (None where it was not gathered), so the protocols' score parts keep one set of keys. A new signal is one
record here and the stage that gathers it."""

from __future__ import annotations

from dataclasses import dataclass

from rerank import TIER, Evidence


@dataclass(frozen=True)
class EvidenceKind:
    name: str  # its key in score parts
    role: str  # rerank.TIER or rerank.TIE_BREAK
    label: str  # the page's words before its value
    in_score_line: bool = True  # the page's score line shows it (the checks have their own "passed n of m")


CHECKS_PASSED = EvidenceKind("checks_passed", TIER, "checks passed", in_score_line=False)  # the user's and prompt's
AGREEMENT = EvidenceKind("agreement", TIER, "agreement on the model's tests")  # CodeT (app/model_checks.py)
STATED_AGREEMENT = EvidenceKind("stated_agreement", TIER, "agreement on the answers' own examples")  # app/stated.py
# Gathered only where the majority rule stopped the rows still growing (app/settled.py `Majority`): its premise,
# measured, is that the answer is among the rows that ended, so they rank first (a client reads a stopped row as cut
# short), above the static demotion too (more than half the rows ended; all of them unparsable is not seen).
ENDED = EvidenceKind("ended", TIER, "ended by itself", in_score_line=False)
KINDS = (ENDED, CHECKS_PASSED, AGREEMENT, STATED_AGREEMENT)  # in the order they rank


def evidence_for(gathered: dict[str, list[float] | None]) -> list[Evidence]:
    """The ranking's evidence, every kind in KINDS order, from what the stages `gathered` (name -> one value per
    row; a kind absent or None was not gathered)."""
    unknown = set(gathered) - {kind.name for kind in KINDS}
    if unknown:
        raise ValueError(f"evidence {sorted(unknown)} is not declared in app/evidence.py KINDS")
    return [Evidence(kind.name, gathered.get(kind.name), kind.role) for kind in KINDS]


def score_line_parts(score_parts: dict) -> list[tuple[str, float]]:
    """(label, value) of each kind of evidence the page's score line shows and this candidate has a value for."""
    return [
        (kind.label, score_parts[kind.name])
        for kind in KINDS
        if kind.in_score_line and score_parts.get(kind.name) is not None
    ]
