"""The page of ``treelm serve`` in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium with the system driver: nothing is downloaded): a sentence
typed into the box gives the SVG tree whose leaves and constituents are those of
``treelm.load(run).parse(...)``, under both tree rules; a translation run shows the API's
translation; a bad request shows its message and the page goes on working. Skips with one line
where no browser is installed (``.ci/run`` installs one)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator

import pytest

import treelm
from treelm.serve.server import App, make_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--window-size=1100,900"]

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                "(pip install -e '.[dev]')")
if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    pytest.skip("no Chromium here (apt-get install chromium chromium-driver)",
                allow_module_level=True)

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def page(tiny_runs) -> Iterator[str]:
    app = App.open([tiny_runs["lm"], tiny_runs["translation"]])
    srv = make_server(app, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host, port = srv.server_address[:2]
    yield f"http://{host}:{port}/"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def browser(monkeypatch_module) -> Iterator[object]:
    monkeypatch_module.setenv("SE_OFFLINE", "true")       # Selenium Manager: never the network
    profile = tempfile.mkdtemp(prefix="treelm-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    try:
        driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    except Exception as e:                                 # a broken install: say so in a line
        pytest.skip(f"Chromium does not start: {str(e).splitlines()[0]}")
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def show(driver, url: str, run: str, sentence: str) -> None:
    driver.get(url)
    wait = WebDriverWait(driver, 60)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    Select(driver.find_element(By.ID, "run")).select_by_value(run)
    box = driver.find_element(By.ID, "sentence")
    box.clear()
    box.send_keys(sentence)
    driver.find_element(By.ID, "go").click()
    wait.until(lambda d: d.find_element(By.ID, "result").get_attribute("aria-busy") == "false")


def drawn(driver, style: str) -> tuple[list[str], int, str]:
    """Leaves, constituents (one horizontal join per constituent) and layer of a drawn tree."""
    svg = driver.find_element(By.CSS_SELECTOR, f"svg.tree[data-style={style}]")
    leaves = [t.text for t in svg.find_elements(By.CSS_SELECTOR, "text.leaf")]
    return leaves, len(svg.find_elements(By.CSS_SELECTOR, "path.join")), \
        svg.get_attribute("data-layer")


def constituents(tree) -> int:
    return sum(1 for p in tree.treepositions() if not isinstance(tree[p], str))


def test_typed_sentence_gives_the_api_tree(browser, page, tiny_runs):
    sentence = "the company said it would sell its stake in the unit"
    show(browser, page, "tiny-lm", sentence)
    assert not browser.find_element(By.ID, "error").is_displayed()
    m = treelm.load(tiny_runs["lm"])
    for style in ("official", "split"):
        want = m.parse([sentence], style=style)[0]
        leaves, joins, layer = drawn(browser, style)
        assert leaves == want.leaves() == sentence.split()
        assert joins == constituents(want) and layer == str(m.default_layer)
    heat = browser.find_elements(By.CSS_SELECTOR, "svg.heatmap rect")
    assert len(heat) == len(m.layers) * len(sentence.split())
    # another layer from the menu redraws with that layer's tree
    Select(browser.find_element(By.ID, "layer")).select_by_value("2")
    WebDriverWait(browser, 60).until(lambda d: drawn(d, "official")[2] == "2")
    leaves, joins, _ = drawn(browser, "official")
    assert joins == constituents(m.parse([sentence], layer=2)[0])


def test_translation_and_errors_on_the_page(browser, page, tiny_runs):
    show(browser, page, "tiny-translation", "a b c d")
    mt = treelm.load(tiny_runs["translation"])
    shown = browser.find_element(By.CSS_SELECTOR, "p.translation").text
    assert shown == mt.translate("a b c d", beam=5)[0]
    assert browser.find_elements(By.CSS_SELECTOR, "svg.attention rect")
    assert drawn(browser, "official")[0] == ["a", "b", "c", "d"]
    show(browser, page, "tiny-lm", " ".join(["word"] * 150))
    err = browser.find_element(By.ID, "error")
    assert err.is_displayed() and "at most" in err.text
    show(browser, page, "tiny-lm", "the cat")
    assert drawn(browser, "official")[0] == ["the", "cat"]
