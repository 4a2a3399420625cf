"""The speculation wing's named choices (which drafter, which acceptance rule): plain tuples, no torch, so that
engine.settings and the drafters both read them from here without importing each other."""

DRAFTER_CHOICES = ("none", "model", "prompt", "sibling", "auto")
ACCEPTANCE_CHOICES = ("coupled", "residual")
