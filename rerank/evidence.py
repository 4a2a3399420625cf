"""Evidence about the candidates beyond their text: each piece a name, one value per candidate and a role that says
where it orders them. `rank` compares the pieces in list order and never reads their names, so a new signal is a
new piece, not a new parameter."""

from __future__ import annotations

from dataclasses import dataclass

TIER = "tier"  # orders before the static policy's demotion and the score: a higher value first
TIE_BREAK = "tie_break"  # orders equal scores (before the model's own log-probability): a higher value first
ROLES = (TIER, TIE_BREAK)


@dataclass(frozen=True)
class Evidence:
    """One kind of evidence: `values[i]` for candidate text i (higher is better; a candidate without a value counts
    as 0), or `values` None where the evidence was not gathered in this run (it then orders nothing and is
    reported as None)."""

    name: str  # the key it is reported under (RankedCandidate.evidence)
    values: tuple[float | None, ...] | list[float | None] | None
    role: str = TIER

    def validate(self, n_texts: int) -> None:
        """ValueError naming the piece unless its role is known and it has one value per text."""
        if self.role not in ROLES:
            raise ValueError(f"evidence {self.name!r} has role={self.role!r}: choose one of {', '.join(ROLES)}")
        if self.values is not None and len(self.values) != n_texts:
            raise ValueError(
                f"evidence {self.name!r} has {len(self.values)} values for {n_texts} texts: give one per text"
            )

    def value(self, index: int) -> float | None:
        """Candidate `index`'s value as reported (None: not gathered, or none for it)."""
        return None if self.values is None else self.values[index]

    def order_value(self, index: int) -> float:
        """What the ordering compares: the value, 0 where there is none."""
        value = self.value(index)
        return 0.0 if value is None else float(value)
