"""Checks: the examples a user already wrote (docstring examples, assert lines), run against every candidate in a
sandbox that is a kernel-enforced boundary (bubblewrap: user, mount, network and PID namespaces, rlimits).

extract.py reads checks out of code as data; sandbox.py runs a Python program confined; runner.py turns
(program, checks) pairs into per-candidate outcomes. Nothing here imports the engine, the app or the ranker.
"""

from checks.extract import Check, checks_for_infill, checks_for_prompt, parse_user_checks
from checks.runner import CandidateChecks, CheckOutcome, CheckRunner
from checks.sandbox import Sandbox, SandboxLimits, SandboxUnavailable

__all__ = [
    "CandidateChecks",
    "Check",
    "CheckOutcome",
    "CheckRunner",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "checks_for_infill",
    "checks_for_prompt",
    "parse_user_checks",
]
