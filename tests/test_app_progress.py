"""While a run goes on, the page shows the best-ranked candidate so far: among the rows that have finished, the one the
pipeline's ranking (agreement) puts first, marked provisional and shown first; none before a row has finished."""

from dataclasses import replace

from app.render import LEADER_NOTE
from app.results import GrowingCandidate, Progress
from app.service import Pipeline
from app.ui import _ui_updates
from engine import ChatTurn, GenerationRequest

REQUEST = GenerationRequest("def add(a, b):\n", k=4)
RIGHT = "    return a + b\n"
ALSO_RIGHT = "    total = a + b\n    return total\n"
ODD = "    import os\n    os.system('ls')\n    return None\n"


def progress(rows: list[tuple[str, str | None]], **changes) -> Progress:
    candidates = tuple(GrowingCandidate(i, text, reason, 5) for i, (text, reason) in enumerate(rows))
    fields = dict(status="generating", model={}, loading=None, elapsed_s=1.0, generation_s=1.0, budget_s=60.0, k=4)
    fields |= dict(generated_tokens=20, prompt_tokens=5, prompt_read_tokens=5, cached_prompt_tokens=0)
    return Progress(**(fields | {"candidates": candidates} | changes))


def test_the_leader_is_the_most_agreed_finished_row_and_none_before_any_finishes():
    pipeline = Pipeline()
    growing = [(RIGHT, None), (ODD, None), (RIGHT + "    # sum", None), (ALSO_RIGHT, None)]
    assert pipeline.provisional_leader(progress(growing), REQUEST) is None
    one = [(ODD, "stop"), (RIGHT, None), (RIGHT, None), (ALSO_RIGHT, None)]
    assert pipeline.provisional_leader(progress(one), REQUEST) == 0  # the only finished row
    three = [(ODD, "stop"), (RIGHT, "stop"), (RIGHT, "stop"), (ALSO_RIGHT, None)]
    assert pipeline.provisional_leader(progress(three), REQUEST) == 1  # two copies agree; the odd one stands alone
    assert pipeline.provisional_leader(progress(three, search_round=2), REQUEST) is None  # a search: no leader


def test_an_answer_in_words_is_led_by_its_code():
    asked = replace(REQUEST, turns=(ChatTurn("user", "Add two numbers."),))
    fence = "Here it is:\n\n```python\ndef add(a, b):\n{}```\nIt adds them."
    rows = [(fence.format(ODD), "stop"), (fence.format(RIGHT), "stop"), (fence.format(RIGHT), "stop")]
    assert Pipeline().provisional_leader(progress(rows, k=3), asked) == 1


def test_the_page_shows_the_leader_first_and_says_it_is_provisional():
    rows = [(ODD, "stop"), (RIGHT, "stop"), (RIGHT, "stop"), (ALSO_RIGHT, None)]
    values = _ui_updates(progress(rows, leader=2), "def add(a, b):\n", "", n_slots=4)
    headers = values[6 + 1 :: 4]  # after the six page values, each slot: group, header, code, program
    assert "best so far" in headers[0] and "candidate 3" in headers[0] and LEADER_NOTE in headers[0]
    assert ["candidate 1" in headers[1], "candidate 2" in headers[2], "candidate 4" in headers[3]] == [True] * 3
    assert not any("best so far" in h for h in headers[1:])
    plain = _ui_updates(progress(rows), "def add(a, b):\n", "", n_slots=4)[6 + 1 :: 4]
    assert "candidate 1" in plain[0] and not any("best so far" in h for h in plain)
