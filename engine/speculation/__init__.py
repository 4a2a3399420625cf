"""Speculation: who proposes draft tokens (drafters), how many each step (controller), and which the target keeps
(acceptance). The decode loop in engine/generate.py calls all three."""
