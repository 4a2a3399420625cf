"""The page in a real browser: Debian's headless Chromium driven by Playwright against the app with tiny models."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from local_app import launch_local
from playwright.sync_api import expect, sync_playwright

from app.models import EngineHub, ModelChoice
from app.requests import Defaults, Limits
from app.service import Pipeline
from app.serving import Service
from app.ui import build_demo
from static_eval import AnalyzerSettings, StaticAnalyzer

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
PROMPT = f"# {XSS}\ndef greet(name):\n    return"
LONG_PROMPT = "total = 0\nfor i in range(10):\n"  # a script: no function body ends it


@pytest.fixture(scope="module")
def app_url():
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    analyzer = StaticAnalyzer(AnalyzerSettings())
    hub = EngineHub([ModelChoice("tiny pair", "tiny:0", "tiny:1")])
    # greedy tiny:0 on LONG_PROMPT runs to 2048 tokens (~10 s): runs end by the budget or the Stop button
    demo = build_demo(
        Service(
            hub,
            Pipeline(analyzer=analyzer),
            Limits(max_k=4, max_budget_s=30, max_new_tokens=2048),
            Defaults(k=3, budget_s=2, temperature=0.0, max_new_tokens=2048),
        ),
    )
    url = launch_local(demo)
    yield url
    demo.close()
    analyzer.close()


@pytest.fixture()
def page(app_url):

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        # loopback only: anything else the page asks for (web fonts...) is refused at once
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(app_url) else route.abort())
        page.goto(app_url, wait_until="domcontentloaded")
        page.locator("#generate").wait_for(timeout=30_000)
        yield page
        browser.close()


def enter_prompt(page, text: str, box: str = "#prompt") -> None:
    editor = page.locator(f"{box} .cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def test_generate_shows_ranked_candidates_and_prompt_html_stays_text(page):
    enter_prompt(page, PROMPT)
    page.locator("#generate").click()
    page.locator("#status", has_text="Done").wait_for(timeout=60_000)

    first = page.locator(".rd-slot").first
    expect(first.locator(".rd-cand")).to_contain_text("#1 · score")
    expect(page.locator("#heatmap table")).to_have_count(1)
    expect(page.locator("#stats")).to_contain_text("tokens/s")
    page.get_by_text("Prompt as run").click()
    echo = page.locator("#prompt-echo .cm-content")
    echo.wait_for(timeout=10_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "app_browser.png"), full_page=True)

    assert XSS in echo.inner_text()  # the payload is shown as text...
    assert XSS in page.locator("#prompt .cm-content").inner_text()
    assert page.evaluate("window.__xss") is None  # ...and never ran
    assert page.locator('img[src="x"]').count() == 0


def test_stop_button_stops_and_keeps_the_partial_ranking(page):
    enter_prompt(page, LONG_PROMPT)
    budget = page.locator("#budget input[type=number]")
    budget.fill("30")
    budget.press("Enter")
    expect(page.locator("#budget input[type=range]")).to_have_value("30")
    expect(page.locator("#prompt .cm-content")).to_contain_text("for i in range(10):")
    page.locator("#generate").click()
    expect(page.locator("#status")).to_contain_text("of 30 s budget", timeout=30_000)
    page.locator("#stop").click()
    expect(page.locator("#status")).to_contain_text("Stopped", timeout=20_000)
    expect(page.locator(".rd-slot").first.locator(".rd-cand")).to_contain_text("#1 · score")


METHOD_PROMPT = (
    'class Stack:\n    """A last-in, first-out stack."""\n\n    def __init__(self):\n        self.items = []\n\n'
    '    def pop(self):\n        """Remove and return the top item; raise IndexError when empty."""\n'
)


@pytest.fixture(scope="module")
def bundled_hub():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    from app.models import FAST_LABEL, menu

    hub = EngineHub([c for c in menu() if c.label == FAST_LABEL])
    hub.preload().join()
    yield hub
    hub.close()


@pytest.fixture(scope="module")
def bundled_url(bundled_hub):
    analyzer = StaticAnalyzer(AnalyzerSettings())
    demo = build_demo(
        Service(
            bundled_hub,
            Pipeline(analyzer=analyzer),
            Limits(max_k=4, max_budget_s=60, max_new_tokens=96),
            Defaults(k=3, budget_s=60, temperature=0.8, max_new_tokens=96, seed=0),
        ),
    )
    yield launch_local(demo)
    demo.close()
    analyzer.close()


@pytest.fixture(scope="module")
def checked_url(bundled_hub):
    """The app as `python app.py` runs it (examples run in the sandbox), on the same bundled model."""
    from checks import CheckRunner

    checker = CheckRunner.create()
    if not checker.available:
        pytest.skip(f"no sandbox here: {checker.reason}")
    analyzer = StaticAnalyzer(AnalyzerSettings())
    demo = build_demo(
        Service(
            bundled_hub,
            Pipeline(analyzer=analyzer, checker=checker),
            Limits(max_k=4, max_budget_s=60, max_new_tokens=64),
            Defaults(k=3, budget_s=20, temperature=0.8, max_new_tokens=48, seed=0),
        ),
    )
    yield launch_local(demo)
    demo.close()
    analyzer.close()


def ready_page(playwright, url: str):
    """(browser, page) on the app at url, with the clipboard allowed and nothing outside the app fetched, once the
    model is ready."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
    page = context.new_page()
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
    page.goto(url, wait_until="domcontentloaded")
    expect(page.locator("#model-state")).to_contain_text("ready", timeout=30_000)
    return browser, page


def clipboard_of_copy_button(page, box: str) -> str:
    page.locator(f"{box} button[aria-label='Copy']").click()
    return page.evaluate("navigator.clipboard.readText()")


@pytest.mark.bundled
def test_the_copied_top_candidate_is_whole_runnable_code(bundled_url):
    """Regression (issue 11): gr.Code stripped the first line's indentation, on screen and in its copy button."""
    import ast

    with sync_playwright() as playwright:
        browser, page = ready_page(playwright, bundled_url)
        # the model line says which format runs and the step times on this machine that chose it
        expect(page.locator("#model-state")).to_contain_text("formats timed on this CPU")
        enter_prompt(page, METHOD_PROMPT)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "copy_1_initial.png"), full_page=True)
        page.locator("#generate").click()
        expect(page.locator("#status")).to_contain_text("Generating", timeout=30_000)
        expect(page.locator("#heatmap")).to_have_text("")  # the last run's parts are not shown
        page.screenshot(path=str(ARTIFACTS / "copy_2_generating.png"), full_page=True)
        page.locator("#status", has_text="Done").wait_for(timeout=120_000)
        page.screenshot(path=str(ARTIFACTS / "copy_3_final.png"), full_page=True)

        completion = clipboard_of_copy_button(page, "#candidate-0")
        assert completion.startswith("        ")  # the method body's indentation, intact
        page.locator(".rd-slot").first.get_by_text("Whole code").click()
        whole = clipboard_of_copy_button(page, "#whole-0")
        assert whole == METHOD_PROMPT + completion
        header = page.locator(".rd-slot").first.locator(".rd-cand").inner_text()
        if "does not parse" not in header:
            ast.parse(whole)  # pasted as is, it is valid Python
        assert "def push" not in completion  # the method ended where its body ended
        browser.close()


SAVE_PREFIX = (
    "import json\n\n\nclass Settings:\n    def __init__(self, path):\n        self.path = path\n"
    '        self.values = {}\n\n    def save(self):\n        """Write the values to the file as JSON."""\n'
)
LOAD_SUFFIX = "\n    def load(self):\n        with open(self.path) as f:\n            self.values = json.load(f)\n"


@pytest.mark.bundled
def test_code_after_the_cursor_makes_middles_shown_in_place(bundled_url):
    """The page's suffix box: the candidates are middles, and the whole code to copy is prompt + middle + suffix."""
    with sync_playwright() as playwright:
        browser, page = ready_page(playwright, bundled_url)
        enter_prompt(page, SAVE_PREFIX + "        ")  # the cursor in save's body, indented
        enter_prompt(page, LOAD_SUFFIX, "#suffix")
        page.locator("#generate").click()
        page.locator("#status", has_text="Done").wait_for(timeout=120_000)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "infill_final.png"), full_page=True)
        middle = clipboard_of_copy_button(page, "#candidate-0")
        page.locator(".rd-slot").first.get_by_text("Whole code").click()
        whole = clipboard_of_copy_button(page, "#whole-0")  # the middle in its place, between the two
        assert whole.startswith(SAVE_PREFIX + "        ") and whole.endswith(LOAD_SUFFIX)
        assert whole[len(SAVE_PREFIX) + 8 : len(whole) - len(LOAD_SUFFIX)].rstrip() == middle.rstrip()
        assert "def load" not in middle  # the middle stopped before the code after the cursor
        browser.close()


WORDS = "Write a Python function add(a, b) that returns the sum of a and b.\nIt must satisfy assert add(2, 3) == 5"
JS_FUNCTION = "// Return the larger of a and b\nfunction max2(a, b) {\n"


@pytest.mark.bundled
def test_a_request_in_words_and_a_javascript_function_give_ranked_highlighted_runnable_code(bundled_url):
    """The page takes words or code: a request in words is answered with code (its prose shown beside it), a
    JavaScript function is completed, analysed and highlighted as JavaScript; the code to copy runs."""
    import ast
    import subprocess

    with sync_playwright() as playwright:
        browser, page = ready_page(playwright, bundled_url)
        enter_prompt(page, WORDS)
        page.locator("#generate").click()
        page.locator("#status", has_text="Done").wait_for(timeout=180_000)
        expect(page.locator("#status")).to_contain_text("a request in words, answered in Python")
        expect(page.locator(".rd-slot").first.locator(".rd-cand")).to_contain_text("#1")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "words_final.png"), full_page=True)
        code = clipboard_of_copy_button(page, "#candidate-0")
        assert "def add" in code and "```" not in code
        ast.parse(code)  # the answer's code block alone, valid Python

        enter_prompt(page, JS_FUNCTION)
        page.locator("#generate").click()
        # the new run's own final status (the words' "Done" stays on the page until the new run's first update)
        page.locator("#status", has_text="JavaScript code").wait_for(timeout=180_000)
        expect(page.locator("#status")).to_contain_text("Done")
        page.screenshot(path=str(ARTIFACTS / "javascript_final.png"), full_page=True)
        assert page.locator("#candidate-0 .cm-content").get_attribute("data-language") == "javascript"
        page.locator(".rd-slot").first.get_by_text("Whole code").click()
        whole = clipboard_of_copy_button(page, "#whole-0")
        assert whole.startswith(JS_FUNCTION) and whole.rstrip().endswith("}")
        if shutil.which("node"):  # node parses it as a program (runs nothing)
            checked = subprocess.run(["node", "--check"], input=whole, text=True, capture_output=True, timeout=30)
            assert checked.returncode == 0, checked.stderr
        browser.close()


IMPOSSIBLE = 'def double(x):\n    """Return twice x.\n\n    >>> double(3)\n    7\n    """\n'  # no right answer gives 7


@pytest.mark.bundled
def test_a_search_is_said_on_the_page_while_it_runs_and_after(checked_url):
    """Where no candidate passes the prompt's example (here none can), the bundled model draws further rounds while
    the budget (20 s) lasts: the status line says so while it runs, and the result says how many rounds and why."""
    with sync_playwright() as playwright:
        browser, page = ready_page(playwright, checked_url)
        enter_prompt(page, IMPOSSIBLE)
        page.locator("#generate").click()
        expect(page.locator("#status")).to_contain_text("Searching with", timeout=60_000)
        expect(page.locator("#status")).to_contain_text("drawing 3 more (round")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "search_running.png"), full_page=True)
        page.locator("#status", has_text="Done").wait_for(timeout=120_000)
        page.screenshot(path=str(ARTIFACTS / "search_final.png"), full_page=True)
        status = page.locator("#status").inner_text()
        assert re.search(r"searched \d+ rounds, \d+ candidates drawn, the best [1-3] shown", status), status
        assert "too little time left" in status or "round limit" in status, status
        browser.close()
