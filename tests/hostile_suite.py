"""The hostile candidates of the sandbox tests, run through the app's own CheckRunner, as whoever runs this file.

tests/test_checks_sandbox.py runs `run_suite` in its own process (as root in CI) and this file as a script under an
ordinary user id (`python3 tests/hostile_suite.py PLANTED_DIR` prints one JSON object). PLANTED_DIR holds files the
candidates go after; they are world-writable on purpose, so that only the sandbox stands between them and harm.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from checks import Check, CheckRunner

PROMPT = 'def f():\n    """\n    >>> f()\n    1\n    """\n'
CHECK = Check(line=3, expression="f()", expected="1", origin="doctest")


def candidates(planted: str, port: int) -> dict[str, str]:
    """Each hostile body of `f`, by what it tries."""
    return {
        "delete_home": f"    import shutil, os\n    shutil.rmtree({planted!r} + '/home', ignore_errors=False)\n"
        "    shutil.rmtree(os.path.expanduser('~'))\n    return 1\n",
        "read_ssh_key": f"    return open({planted!r} + '/home/.ssh/id_ed25519').read()\n",
        "read_root_ssh": "    import os\n    return os.listdir('/root/.ssh')\n",
        "open_socket": f"    import socket\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    return 1\n",
        "fork_bomb": "    import os\n    while True:\n        try:\n            os.fork()\n        except OSError:\n"
        "            pass\n",
        "allocate_50gb": "    x = bytearray(50 * 1024 ** 3)\n    return 1\n",
        "print_a_gigabyte": "    import sys\n    chunk = 'x' * (1 << 20)\n    for _ in range(1024):\n"
        "        sys.stdout.write(chunk)\n        sys.__stdout__.write(chunk)\n    return 1\n",
        "sleep_forever": "    import time\n    time.sleep(10 ** 6)\n",
        "signal_parent": f"    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        f"    os.kill({os.getpid()}, signal.SIGKILL)\n    return 1\n",
        "write_outside": f"    open({planted!r} + '/outside.txt', 'w').write('pwned')\n"
        "    open('/usr/pwned', 'w').write('pwned')\n    return 1\n",
        "change_workdir_files": f"    import os\n    open({planted!r} + '/project/main.py', 'w').write('pwned')\n"
        f"    os.remove({planted!r} + '/project/main.py')\n    return 1\n",
    }


def plant(planted: str) -> None:
    """The files the candidates go after: a home with a key, a project file."""
    for folder in ("home/.ssh", "project"):
        os.makedirs(os.path.join(planted, folder), exist_ok=True)
        os.chmod(os.path.join(planted, folder), 0o777)
        os.chmod(os.path.join(planted, folder.split("/")[0]), 0o777)
    for name, text in (
        ("home/.ssh/id_ed25519", "SECRET-KEY"),
        ("home/notes.txt", "notes"),
        ("project/main.py", "print('hello')\n"),
    ):
        path = os.path.join(planted, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(path, 0o666)
    os.chmod(planted, 0o777)


def run_suite(planted: str) -> dict:
    """Every hostile candidate's outcome, the wall time of the batch, and whether anything got out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    runner = CheckRunner.create()
    if not runner.available:
        return {"available": False, "reason": runner.reason}
    bodies = candidates(planted, listener.getsockname()[1])
    started = time.monotonic()
    results = runner.run([PROMPT + body for body in bodies.values()], [CHECK])
    wall = time.monotonic() - started
    try:
        listener.accept()
        connected = True
    except BlockingIOError:
        connected = False
    return {
        "available": True,
        "as_nobody": runner.sandbox.as_nobody,
        "wall_s": wall,
        "connected": connected,
        "outcomes": {name: r.as_dict() for name, r in zip(bodies, results)},
        "leaked_secret": any("SECRET-KEY" in json.dumps(r.as_dict()) for r in results),
    }


if __name__ == "__main__":
    print(json.dumps(run_suite(sys.argv[1])))
