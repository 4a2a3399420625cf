"""Checks: the examples a user already wrote (docstring and comment examples, assert lines), run against every
candidate in a sandbox that is a kernel-enforced boundary (bubblewrap: user, mount, network and PID namespaces,
rlimits), in Python and, where their tools are here, in JavaScript (node), C++ (g++), Rust (rustc) and Java.

check.py is the record; extract.py reads checks out of Python code, braced.py (with clike.py's lexing) out of the
other languages' comments and assert lines; sandbox.py runs a Python program confined; runner.py turns (program,
checks) pairs into per-candidate outcomes, through programs.py (each language's check program, harness/ its
harnesses) and toolchains.py (the tools found here, their limits, the driver that builds and runs them). Nothing
here imports the engine, the app or the ranker; languages.py (the table of languages) is read.
"""

from checks.extract import Check, checks_for_infill, checks_for_prompt, checks_for_words, parse_user_checks
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
    "checks_for_words",
    "parse_user_checks",
]
