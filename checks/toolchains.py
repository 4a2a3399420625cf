"""What runs checks in the languages other than Python on this machine, and how, inside the sandbox.

A Toolchain is found once per runner (`find`): the language's commands (named by languages.py's CheckRun) are
looked up on PATH and followed to the files they are. The sandbox shows /usr; a toolchain elsewhere (rustup's,
under root's home) is shown read-only at /opt/<language>, and a JDK's links into /etc are shown where they point.
Each candidate's program is then one Python driver (DRIVER, run by the sandbox's python3 as a Python check is) that
writes the files, builds them where the language builds, lowers the limits to what the checks' program itself may
use, and execs it; the program writes the report lines the Python harness writes.

Limits beyond the Python checks' own (the sandbox's, CHECKS_LIMITS), and why:
- node: V8 reserves address space before it allocates anything (node does not start under about 700 MB of
  RLIMIT_AS here), so node's address space is the Python limit + NODE_EXTRA_MB, and `--max-old-space-size` (half
  the Python limit) bounds the heap it may fill;
- the JVM (javac too): likewise + JVM_EXTRA_MB, with -Xmx half the Python limit and its class and code spaces
  bounded;
- compilers (g++, rustc, javac): a build may take BUILD_S seconds, write BUILD_FILE_MB files and use BUILD_MB of
  address space; then the limits go down to the Python ones (the JVM keeps its address space) and the built
  program runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

import languages
from checks import programs
from checks.check import Check
from checks.sandbox import Binds, Sandbox, SandboxLimits

BUILD_S = 20.0  # one candidate's build: g++ takes 2-5 s on <bits/stdc++.h> here, two builds at once on 2 CPUs
BUILD_MB = 2048  # address space of a build (rustc's threads, cc1plus on <bits/stdc++.h>)
BUILD_FILE_MB = 64  # each file a build writes, and each private tmpfs (/sandbox, /tmp) of a built language
NODE_EXTRA_MB = 768  # what V8 reserves beyond its heap
JVM_EXTRA_MB = 1024  # what the JVM reserves beyond its heap (metaspace, code cache, thread stacks)

DRIVER = r"""
import os, resource, subprocess, sys
_SPEC = %(spec)r
_FD = int(os.environ["REPORT_FD"])
def _send(fields):
    os.write(_FD, (repr(fields) + "\n").encode("utf-8"))
def _first_error(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    at = next((i for i, line in enumerate(lines) if "error" in line.lower()), 0)
    said = " ".join([lines[at]] + [l for l in lines[at + 1 : at + 4] if l.startswith(("symbol:", "location:"))])
    return said if len(said) <= 300 else said[:297] + "..."
for _name, _text in _SPEC["files"].items():
    os.makedirs(os.path.dirname(_name) or ".", exist_ok=True)
    with open(_name, "w", encoding="utf-8") as _handle:
        _handle.write(_text)
if _SPEC["build"]:
    try:
        _built = subprocess.run(_SPEC["build"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=_SPEC["build_s"])
    except subprocess.TimeoutExpired:
        _send({"loaded": False, "error": "its build took longer than %%g s" %% _SPEC["build_s"]})
        sys.exit(0)
    if _built.returncode != 0:
        _send({"loaded": False, "error": "compile error: " + _first_error(_built.stdout.decode("utf-8", "replace"))})
        sys.exit(0)
_used = resource.getrusage(resource.RUSAGE_SELF)
_LIMITS = {"as": resource.RLIMIT_AS, "cpu": resource.RLIMIT_CPU, "fsize": resource.RLIMIT_FSIZE}
for _name, _value in _SPEC["run_limits"].items():
    if _name == "cpu":
        _value += int(_used.ru_utime + _used.ru_stime) + 1   # the driver's own seconds count on after exec
    resource.setrlimit(_LIMITS[_name], (_value, _value))
if _SPEC["report_on_stdout"]:
    os.dup2(_FD, 1)
os.execve(_SPEC["run"][0], _SPEC["run"], dict(os.environ, **_SPEC["env"]))
"""


class ToolMissing(Exception):
    """A language's command is not on this machine, or cannot be shown in the sandbox; the message says which."""


@dataclass(frozen=True)
class Toolchain:
    """How one language's checks run here: the commands inside the sandbox, what it shows, and the limits."""

    language: str  # the id in languages.py
    program: Callable[[str, list[Check], float], programs.CheckProgram]  # the files of one candidate's program
    run: tuple[str, ...]  # the command that runs the checks ("{entry}" stands for the program's entry)
    limits: SandboxLimits  # the sandbox's, for one candidate's build and run together
    run_limits: dict[str, int]  # lowered before the run: "as" and "fsize" in bytes, "cpu" in seconds
    build: tuple[str, ...] = ()  # the build command, if any ("{entry}"; "{sources}": every .java file)
    binds: Binds = ()  # read-only directories shown inside (a toolchain outside /usr, a JDK's /etc)
    env: dict[str, str] = field(default_factory=dict)  # set for the run
    report_on_stdout: bool = False  # the report descriptor becomes the program's stdout (the JVM opens no fd)

    def driver(self, program: str, checks: list[Check], limit_s: float) -> str:
        """The confined Python program that builds and runs `program`'s checks."""
        built = self.program(program, checks, limit_s)
        sources = sorted(name for name in built.files if name.endswith(".java"))

        def expand(command: tuple[str, ...]) -> list[str]:
            return [part for arg in command for part in (sources if arg == "{sources}" else [arg])]

        spec = {
            "files": built.files,
            "build": [arg.replace("{entry}", built.entry) for arg in expand(self.build)],
            "build_s": BUILD_S,
            "run": [arg.replace("{entry}", built.entry) for arg in expand(self.run)],
            "run_limits": self.run_limits,
            "env": self.env,
            "report_on_stdout": self.report_on_stdout,
        }
        return DRIVER % {"spec": spec}


# --- finding the tools --------------------------------------------------------------------------------------


def tool_path(name: str) -> str:
    """The file the command `name` on PATH is (links followed), or ToolMissing."""
    found = shutil.which(name)
    if found is None:
        raise ToolMissing(f"{name} is not on PATH here")
    return os.path.realpath(found)


def _shown(path: str, prefix: str, sandbox: Sandbox, language: str) -> tuple[str, Binds]:
    """Where `path` (a file under the toolchain directory `prefix`) is inside the sandbox, and the bind that shows
    it: none under /usr (shown already), else `prefix` at /opt/<language>."""
    if path.startswith("/usr/"):
        return path, ()
    parts = tuple(part for part in ("bin", "lib", "libexec", "include") if os.path.isdir(os.path.join(prefix, part)))
    try:
        host = sandbox.reachable(prefix, parts)
    except OSError as err:
        raise ToolMissing(f"{path} lives where the sandbox cannot show it ({err})") from None
    inside = f"/opt/{language}"
    return inside + path[len(prefix) :], ((host, inside),)


def _prefix(path: str) -> str:
    """The toolchain directory of a command's file: the directory above its bin/."""
    return os.path.dirname(os.path.dirname(path))


def _built_limits(base: SandboxLimits, memory_mb: int) -> SandboxLimits:
    """The sandbox's limits for a language that builds: the build's time, files and address space on top."""
    return replace(
        base,
        wall_s=base.wall_s + BUILD_S + 1.0,
        cpu_s=max(base.cpu_s, int(BUILD_S)),
        memory_mb=max(base.memory_mb, memory_mb),
        output_kb=max(base.output_kb, BUILD_FILE_MB * 1024),
        disk_mb=max(base.disk_mb, BUILD_FILE_MB),
        processes=base.processes + 32,  # rustc's and the JVM's threads, the linker
    )


def _run_limits(base: SandboxLimits, memory: bool = True) -> dict[str, int]:
    limits = {"cpu": base.cpu_s, "fsize": base.output_kb * 1024}
    return {**limits, "as": base.memory_mb * 1024 * 1024} if memory else limits


def javascript(sandbox: Sandbox, commands: languages.CheckRun) -> Toolchain:
    """node runs harness/check.js, which loads the candidate as a script and evaluates each check in its realm."""
    base = sandbox.limits
    path = tool_path(commands.runtime)
    node, binds = _shown(path, _prefix(path), sandbox, "javascript")
    heap_mb = max(64, base.memory_mb // 2)
    return Toolchain(
        "javascript",
        programs.javascript,
        (node, f"--max-old-space-size={heap_mb}", "--v8-pool-size=2", "{entry}"),
        replace(
            base, wall_s=base.wall_s + 1.0, memory_mb=base.memory_mb + NODE_EXTRA_MB, processes=base.processes + 16
        ),
        {},
        binds=binds,
        env={"UV_THREADPOOL_SIZE": "2"},
    )


HEADERS_INSIDE = "/opt/cpp-headers"
CPP_STANDARD = ("-std=gnu++17", "-O0")  # the flags the precompiled headers and every build share


def _precompile(gpp: str, sandbox: Sandbox) -> Binds:
    """The harness's headers (programs.cpp_headers) in a directory shown at HEADERS_INSIDE, and their precompiling
    started, once, in the background, by the host's own g++: its input is the system's headers and ours, nothing
    of a candidate's. Until a .gch is there (6-15 s), builds parse the header itself, to the same effect, slower:
    the harness alone costs 0.6 s of CPU a build, <bits/stdc++.h> (every MultiPL-E prompt's) 2-4 s."""
    directory = sandbox.shared_dir("cpp-headers")
    for name, text in programs.cpp_headers().items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(os.path.join(directory, name), 0o644)

    def build() -> None:
        for name in ("rd_check.h", "rd_stdcxx.h"):
            header = os.path.join(directory, name)
            partial = header + ".part.gch"
            try:
                subprocess.run(
                    [gpp, *CPP_STANDARD, "-x", "c++-header", header, "-o", partial],
                    capture_output=True,
                    timeout=300,
                    check=True,
                )
                os.chmod(partial, 0o644)
                os.rename(partial, header + ".gch")  # whole or not at all: a build never reads half of one
            except (OSError, subprocess.SubprocessError):
                return  # not precompiled: builds are slower, and right

    threading.Thread(target=build, name="precompile-c++", daemon=True).start()
    return ((directory, HEADERS_INSIDE),)


def cpp(sandbox: Sandbox, commands: languages.CheckRun) -> Toolchain:
    """g++ builds the candidate and its checks as one program (harness/check.hpp), which runs each check forked."""
    path = tool_path(commands.compiler)
    gpp, binds = _shown(path, _prefix(path), sandbox, "cpp")
    return Toolchain(
        "cpp",
        partial(programs.cpp, headers=HEADERS_INSIDE),
        ("/sandbox/prog",),
        _built_limits(sandbox.limits, 1024),
        _run_limits(sandbox.limits),
        build=(gpp, *CPP_STANDARD, "-pipe", "-w", "-fmax-errors=3", "-o", "prog", "{entry}"),
        binds=binds + _precompile(path, sandbox),
    )


def rust(sandbox: Sandbox, commands: languages.CheckRun) -> Toolchain:
    """rustc builds the candidate, its checks and harness/check.rs as one crate, which runs each check in a child
    process of its own."""
    tool_path(commands.compiler)
    compiler = shutil.which(commands.compiler)  # not followed: rustup's proxy reads the name it is called by
    try:  # rustup's `rustc` is a proxy: the toolchain it stands for is where `--print sysroot` says
        sysroot = subprocess.run(
            [compiler, "--print", "sysroot"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        raise ToolMissing(f"{compiler} --print sysroot failed here ({err})") from None
    rustc, binds = _shown(os.path.join(sysroot, "bin", "rustc"), sysroot, sandbox, "rust")
    linker = tool_path("cc")
    if not linker.startswith("/usr/"):
        raise ToolMissing(f"rustc links with cc, and cc here is {linker}, outside /usr (what the sandbox shows)")
    return Toolchain(
        "rust",
        programs.rust,
        ("/sandbox/prog",),
        _built_limits(sandbox.limits, BUILD_MB),
        _run_limits(sandbox.limits),
        build=(
            rustc,
            "--edition=2021",
            "--cap-lints=allow",
            "--error-format=short",
            "-Copt-level=0",
            "-Cdebuginfo=0",
            "-Cstrip=symbols",
            f"-Clinker={linker}",
            "-o",
            "prog",
            "{entry}",
        ),
        binds=binds,
    )


def _jdk_config(home: str) -> Binds:
    """The directories under /etc that a JDK's configuration links point into (Debian's JDK reads
    conf/security/java.security and lib/jvm.cfg from /etc/java-<n>-openjdk): shown where they are."""
    found = set()
    for name in ("lib/jvm.cfg", "conf/security/java.security"):
        target = os.path.realpath(os.path.join(home, name))
        if target.startswith("/etc/"):
            found.add("/" + os.path.join(*target.split("/")[1:3]))
    return tuple((directory, directory) for directory in sorted(found))


def java(sandbox: Sandbox, commands: languages.CheckRun) -> Toolchain:
    """javac builds the candidate (in a package), RdChecks and harness/Harness.java; java runs each check in a
    thread of its own."""
    base = sandbox.limits
    javac_path, java_path = tool_path(commands.compiler), tool_path(commands.runtime)
    javac, binds = _shown(javac_path, _prefix(javac_path), sandbox, "java")
    java_cmd, more = _shown(java_path, _prefix(java_path), sandbox, "java-runtime")
    heap_mb = max(64, base.memory_mb // 2)
    jvm = (
        "-Xshare:auto",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:-UsePerfData",
        f"-Xmx{heap_mb}m",
        "-XX:MaxMetaspaceSize=128m",
        "-XX:CompressedClassSpaceSize=64m",
        "-XX:ReservedCodeCacheSize=32m",
    )
    limits = _built_limits(base, base.memory_mb + JVM_EXTRA_MB)
    return Toolchain(
        "java",
        programs.java,
        (java_cmd, *jvm, "-cp", "classes", "{entry}"),
        replace(limits, processes=base.processes + 48),
        _run_limits(base, memory=False),
        build=(
            javac,
            *(f"-J{flag}" for flag in jvm),
            "-nowarn",
            "-proc:none",
            "-Xmaxerrs",
            "3",
            "-encoding",
            "UTF-8",
            "-d",
            "classes",
            "{sources}",
        ),
        binds=tuple(dict.fromkeys(binds + more + _jdk_config(_prefix(javac_path)) + _jdk_config(_prefix(java_path)))),
        report_on_stdout=True,
    )


FINDERS = {"javascript": javascript, "cpp": cpp, "rust": rust, "java": java}  # by language id

# A program and a check that pass wherever the toolchain works: run once before a language's first checks.
PROBES = {
    "javascript": "function one() { return 1; }\n",
    "cpp": "long one() { return 1; }\n",
    "rust": "fn one() -> i64 { 1 }\n",
    "java": "class Probe { static long one() { return 1; } }\n",
}


def find(language: languages.Language, sandbox: Sandbox) -> Toolchain:
    """The toolchain of `language` here (the commands its CheckRun names), or ToolMissing saying why not."""
    finder = FINDERS.get(language.name)
    if finder is None:
        known = ", ".join(languages.by_name(name).display for name in ("python", *FINDERS))
        raise ToolMissing(f"this app has no check program for {language.display} (it has one for {known})")
    return finder(sandbox, language.check)
