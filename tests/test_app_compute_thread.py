"""The hub's compute thread: every load and generation of a local model on one thread, whichever thread asks."""

from __future__ import annotations

import threading
import time

import pytest

from app.compute_thread import ComputeThread
from app.models import EngineHub, ModelChoice
from engine import EngineSettings, GenerationRequest, load_any


def _in_thread(function, timeout_s: float = 60.0):
    """function() on a fresh thread of its own; its result, or its exception raised here (a hang fails)."""
    box: dict = {}

    def body():
        try:
            box["result"] = function()
        except BaseException as err:  # noqa: BLE001 - raised again below
            box["error"] = err

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"the call did not return within {timeout_s} s"
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_calls_from_any_thread_run_on_one_thread_and_raise_where_they_were_made():
    compute = ComputeThread(name="test-compute")
    here = lambda: threading.current_thread()  # noqa: E731
    first, second = compute.run(here), _in_thread(lambda: compute.run(here))
    assert first is second and first.name == "test-compute" and first is not threading.current_thread()
    nested = _in_thread(lambda: compute.run(lambda: compute.run(here)), timeout_s=10)  # no deadlock: it runs at once
    assert nested is first
    with pytest.raises(ValueError, match="k=0 is out of range"):
        compute.run(lambda: (_ for _ in ()).throw(ValueError("k=0 is out of range")))
    ran = []
    waiting = threading.Thread(target=lambda: compute.run(lambda: ran.append(1)))
    compute.run(lambda: (waiting.start(), time.sleep(0.2)))  # queued while the thread is busy
    compute.close()
    waiting.join(timeout=5)
    assert ran == [1] and not first.is_alive()  # the call queued before close ran; close waited for the thread
    later = compute.run(here)  # a call after close starts another
    assert later is not first and later.is_alive()
    compute.close()


def test_the_hub_loads_and_generates_on_its_compute_thread_for_every_caller():
    loaded_on, generated_on = [], []

    def loader(spec, cache_dir, dtype="auto"):
        loaded_on.append(threading.current_thread())
        return load_any(spec, cache_dir)

    hub = EngineHub([ModelChoice("tiny", "tiny:0")], settings=EngineSettings(drafter="none"), loader=loader)
    request = GenerationRequest("def f(x):\n", k=2, max_new_tokens=4, budget_s=30, temperature=0.8, seed=1)

    def generate():
        hear = lambda partial: generated_on.append(threading.current_thread())  # noqa: E731
        return hub.engine(None).generate(request, on_update=hear)

    from_main, from_other = generate(), _in_thread(generate)
    (compute,) = loaded_on
    assert compute.name == "ranked-drafts-compute" and compute is not threading.current_thread()
    assert generated_on and set(generated_on) == {compute}  # one thread, the one that loaded, for both callers
    assert [c.token_ids for c in from_main.candidates] == [c.token_ids for c in from_other.candidates]
    assert hub.engine(None).settings.drafter == "none"  # the engine's attributes read through
    hub.close()
