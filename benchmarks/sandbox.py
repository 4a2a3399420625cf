"""Runs untrusted candidate programs in separate, limited Python processes; never in the caller's process.

What each run gets (best effort, Linux):
- a fresh `python -I` (isolated: no user site, no PYTHON* variables, no current dir on sys.path)
  in a new empty temporary directory, removed afterwards;
- an environment of PATH, LANG, HOME=the temp dir and nothing else (no proxies, no credentials);
- limits set in the child before exec: address space (RLIMIT_AS), CPU seconds, file size,
  processes, no core files; a new session, so a timeout kills the whole process group;
- no network where the kernel allows it: a new, empty network namespace (unshare CLONE_NEWNET,
  which needs root or user namespaces); `network_isolated` in each result says whether it held;
- when the harness runs as root, the child drops to the `nobody` user after unsharing (using the
  system python3 if `nobody` cannot reach the harness's interpreter; HumanEval needs only the
  standard library); `dropped_privileges` in each result says whether it did.
There is no filesystem isolation beyond the temporary directory and the user drop: this is not a
security boundary for hostile code, only a guard for model-written code that goes wrong.
"""
from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

PASSED, FAILED, TIMEOUT = "passed", "failed", "timeout"
MAX_WORKERS = 2  # this machine's CPU is shared: never more than two sandboxed processes at once
_CLONE_NEWNET = 0x40000000
_NOBODY = 65534


@dataclass(frozen=True)
class SandboxSettings:
    """Limits of one sandboxed run."""

    timeout_s: float = 10.0          # wall clock per program (HumanEval's own is 3 s; our CPU is shared)
    memory_mb: int = 1024            # address-space limit (RLIMIT_AS)
    max_output_kb: int = 256         # stdout + stderr file size limit (RLIMIT_FSIZE), tail kept for the detail
    max_processes: int = 256         # RLIMIT_NPROC for the child's user (forks beyond fail)
    isolate_network: bool = True     # try a new network namespace
    drop_to_nobody: bool = True      # when root, run as `nobody`
    python: str | None = None        # interpreter for the programs; None: this one, or python3 that nobody can run
    workers: int = MAX_WORKERS       # parallel runs, at most MAX_WORKERS

    def validate(self) -> None:
        """Raise ValueError naming the bad value and the allowed range."""
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s={self.timeout_s!r} is out of range: it must be > 0 seconds")
        if not self.memory_mb >= 64:
            raise ValueError(f"memory_mb={self.memory_mb!r} is out of range: it must be >= 64 (Python needs it)")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers={self.workers!r} is out of range: it must be in 1..{MAX_WORKERS}")


@dataclass
class ExecResult:
    """How one program ended."""

    status: str                      # PASSED (exit 0), FAILED (anything else) or TIMEOUT (killed at the limit)
    detail: str                      # last line of stderr, or the signal / exit code
    wall_s: float                    # seconds from start to end
    network_isolated: bool = False   # the child ran in an empty network namespace
    dropped_privileges: bool = False  # the child ran as `nobody`

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def as_dict(self) -> dict:
        return asdict(self)


def _nobody_can_run(path: str) -> bool:
    """Whether every directory above `path` and the file itself are executable by others."""
    path = os.path.realpath(path)
    parts = [path] + [os.path.dirname(path)]
    while parts[-1] != os.path.dirname(parts[-1]):
        parts.append(os.path.dirname(parts[-1]))
    return all(os.path.exists(part) and os.stat(part).st_mode & 0o001 for part in parts)


def resolve_interpreter(settings: SandboxSettings) -> tuple[str, bool]:
    """(python to run, whether to drop to `nobody`) for these settings on this machine."""
    want_drop = settings.drop_to_nobody and os.geteuid() == 0
    if settings.python is not None:
        return settings.python, want_drop and _nobody_can_run(settings.python)
    if not want_drop or _nobody_can_run(sys.executable):
        return sys.executable, want_drop
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system and _nobody_can_run(system):
        return system, True
    return sys.executable, False


def _libc_unshare():
    """libc's unshare(2), looked up in the parent (no dlopen after fork), or None."""
    try:
        return ctypes.CDLL(None, use_errno=True).unshare
    except (OSError, AttributeError):
        return None


def _limit_child(settings: SandboxSettings, status_fd: int, drop: bool, unshare) -> None:
    """Runs in the forked child before exec: limits, network namespace, user drop.

    Only system calls happen here (no imports, no dlopen), as is safe between fork and exec.
    """
    memory = settings.memory_mb * 1024 * 1024
    cpu = int(settings.timeout_s) + 2
    output = settings.max_output_kb * 1024
    for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_FSIZE, output),
                         (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, settings.max_processes)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass  # a limit the platform refuses stays at its default; the wall-clock timeout still holds
    isolated = bool(settings.isolate_network and unshare is not None and unshare(_CLONE_NEWNET) == 0)
    os.write(status_fd, b"1" if isolated else b"0")
    os.close(status_fd)
    if drop:
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)


@dataclass
class _Running:
    """One started program: its process and what is needed to judge and clean it up."""

    proc: subprocess.Popen
    workdir: str
    status_fd: int           # read end of the child's "network isolated?" byte
    started: float           # time.monotonic() at start
    dropped: bool            # runs as nobody


def _start(source: str, settings: SandboxSettings, python: str, drop: bool, unshare) -> _Running:
    """Write the program to a fresh temp dir and start it in a limited child process."""
    workdir = tempfile.mkdtemp(prefix="sandbox-")
    if drop:
        os.chown(workdir, _NOBODY, _NOBODY)
    program = os.path.join(workdir, "program.py")
    with open(program, "w", encoding="utf-8") as handle:
        handle.write(source)
    os.chmod(program, 0o644)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "PYTHONDONTWRITEBYTECODE": "1"}
    status_read, status_write = os.pipe()
    with open(os.path.join(workdir, "output.txt"), "wb") as output:
        proc = subprocess.Popen(
            [python, "-I", "-B", program], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
            stdout=output, stderr=output, start_new_session=True, pass_fds=(status_write,),
            preexec_fn=lambda: _limit_child(settings, status_write, drop, unshare),
        )
    os.close(status_write)
    return _Running(proc, workdir, status_read, time.monotonic(), drop)


def _finish(run: _Running, settings: SandboxSettings, timed_out: bool, ended: float) -> ExecResult:
    """Kill what is left of the program's process group, judge the run, remove its temp dir."""
    try:
        _kill_group(run.proc)  # on a timeout, and children the program left behind
        returncode = run.proc.wait()
        wall = ended - run.started
        with os.fdopen(run.status_fd, "rb") as status:
            isolated = status.read(1) == b"1"
        if timed_out:
            return ExecResult(TIMEOUT, f"no exit within {settings.timeout_s:g} s", wall, isolated, run.dropped)
        if returncode == 0:
            return ExecResult(PASSED, "", wall, isolated, run.dropped)
        detail = _failure_detail(os.path.join(run.workdir, "output.txt"), returncode)
        return ExecResult(FAILED, detail, wall, isolated, run.dropped)
    finally:
        shutil.rmtree(run.workdir, ignore_errors=True)


def run_program(source: str, settings: SandboxSettings = SandboxSettings()) -> ExecResult:
    """Run one Python program in a sandboxed child process and say how it ended.

    Parameters
    ----------
    source : str
        The whole program; exit status 0 means success.
    settings : SandboxSettings

    Returns
    -------
    result : ExecResult
    """
    return run_many([source], settings)[0]


def run_many(sources: list[str], settings: SandboxSettings = SandboxSettings()) -> list[ExecResult]:
    """Run programs, at most `settings.workers` at once, from this one thread; results in input order.

    No threads: a fork from a multi-threaded parent could deadlock before exec.
    """
    settings.validate()
    python, drop = resolve_interpreter(settings)
    unshare = _libc_unshare() if settings.isolate_network else None
    results: list[ExecResult | None] = [None] * len(sources)
    pending = list(range(len(sources)))[::-1]  # popped from the end: input order
    running: dict[int, _Running] = {}
    try:
        while pending or running:
            while pending and len(running) < settings.workers:
                index = pending.pop()
                running[index] = _start(sources[index], settings, python, drop, unshare)
            for index, run in list(running.items()):
                now = time.monotonic()
                exited = run.proc.poll() is not None
                timed_out = not exited and now - run.started > settings.timeout_s
                if exited or timed_out:
                    results[index] = _finish(running.pop(index), settings, timed_out, now)
            if running:
                time.sleep(0.005)
    finally:
        for run in running.values():  # interrupted: leave nothing behind
            _finish(run, settings, timed_out=True, ended=time.monotonic())
    return results


def _kill_group(proc: subprocess.Popen, wait_s: float = 2.0) -> None:
    """SIGKILL the program's process group, then wait (a little) until it is gone.

    Waiting matters: killed processes still count against `nobody`'s process limit until they are
    reaped, which would make the next program's fork fail.
    """
    deadline = time.monotonic() + wait_s
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.poll()  # reap the leader if it was ours to reap
        while time.monotonic() < deadline:
            os.killpg(proc.pid, 0)  # raises once no process of the group is left
            time.sleep(0.01)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone (and its id not ours any more)


def _failure_detail(output_path: str, returncode: int) -> str:
    with open(output_path, "rb") as handle:
        handle.seek(max(0, os.path.getsize(output_path) - 2048))
        lines = handle.read().decode("utf-8", "replace").strip().splitlines()
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else str(-returncode)
        return f"killed by {name}" + (f": {lines[-1]}" if lines else "")
    return lines[-1][:300] if lines else f"exit status {returncode}"


def check_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """HumanEval's check program: prompt + completion, the test code, then check(entry_point)."""
    return f"{prompt}{completion}\n\n{test}\n\ncheck({entry_point})\n"
