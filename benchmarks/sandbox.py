"""The benchmark harness's way to run a candidate program with its hidden tests: checks/sandbox.py's confinement
(bubblewrap namespaces, rlimits; see there), with the harness's limits and its pass/fail/timeout verdict by exit
status. Where the sandbox cannot start, SandboxUnavailable is raised and nothing runs.
"""

from __future__ import annotations

import signal
from dataclasses import asdict, dataclass

from checks.sandbox import MAX_WORKERS, Confined, Sandbox, SandboxLimits

PASSED, FAILED, TIMEOUT = "passed", "failed", "timeout"


@dataclass(frozen=True)
class SandboxSettings:
    """Limits of one sandboxed run."""

    timeout_s: float = 10.0  # wall clock per program (HumanEval's own is 3 s; our CPU is shared)
    memory_mb: int = 1024  # address-space limit (RLIMIT_AS)
    max_output_kb: int = 256  # stdout + stderr file size limit (RLIMIT_FSIZE), tail kept for the detail
    max_processes: int = 256  # processes and threads a program may add
    workers: int = MAX_WORKERS  # parallel runs, at most MAX_WORKERS

    def limits(self) -> SandboxLimits:
        """The confinement's limits; ValueError names a bad value and the allowed range."""
        limits = SandboxLimits(
            wall_s=self.timeout_s,
            cpu_s=max(1, int(self.timeout_s) + 2),
            memory_mb=self.memory_mb,
            output_kb=self.max_output_kb,
            processes=self.max_processes,
            workers=self.workers,
        )
        limits.validate()
        return limits


@dataclass
class ExecResult:
    """How one program ended."""

    status: str  # PASSED (exit 0), FAILED (anything else) or TIMEOUT (killed at the limit)
    detail: str  # last line of its output, or the signal / exit code
    wall_s: float  # seconds from start to end
    network_isolated: bool = True  # ran in an empty network namespace (always, under the sandbox)
    dropped_privileges: bool = True  # ran as uid 65534 without capabilities (always, under the sandbox)

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def as_dict(self) -> dict:
        return asdict(self)


def run_program(source: str, settings: SandboxSettings = SandboxSettings()) -> ExecResult:
    """Run one Python program confined and say how it ended (exit status 0 means success)."""
    return run_many([source], settings)[0]


def run_many(sources: list[str], settings: SandboxSettings = SandboxSettings()) -> list[ExecResult]:
    """Run programs confined, at most `settings.workers` at once; results in input order."""
    sandbox = Sandbox.create(settings.limits())
    try:
        return [_verdict(run, settings) for run in sandbox.run_many(sources)]
    finally:
        sandbox.close()


def _verdict(run: Confined, settings: SandboxSettings) -> ExecResult:
    if run.timed_out:
        return ExecResult(TIMEOUT, f"no exit within {settings.timeout_s:g} s", run.wall_s)
    if run.returncode == 0:
        return ExecResult(PASSED, "", run.wall_s)
    lines = run.output.strip().splitlines()
    if run.returncode < 0:
        number = -run.returncode
        name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
        return ExecResult(FAILED, f"killed by {name}" + (f": {lines[-1]}" if lines else ""), run.wall_s)
    return ExecResult(FAILED, lines[-1][:300] if lines else f"exit status {run.returncode}", run.wall_s)


def check_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """HumanEval's check program: prompt + completion, the test code, then check(entry_point)."""
    return f"{prompt}{completion}\n\n{test}\n\ncheck({entry_point})\n"
