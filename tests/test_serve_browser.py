"""The page of ``treelm serve`` in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium with the system driver: nothing is downloaded): a sentence
typed into the box gives the SVG tree whose leaves and constituents are those of
``treelm.load(run).parse(...)``, under both tree rules; a translation run shows the API's
translation; a bad request shows its message and the page goes on working; a run's training
curves (validation perplexity, loss, tree F1 per layer and rule against tokens) are drawn from its
metrics.jsonl, and a validation appended while the page is open shows up without a reload. Skips
with one line where no browser is installed (``.ci/run`` installs one)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import treelm
from treelm.cli import main
from treelm.rundir.files import read_metrics
from treelm.serve.server import App, make_server

ROOT = Path(__file__).resolve().parents[1]
TREEBANK = """\
( (S (NP-SBJ (DT the) (NN company) ) (VP (VBD said) (SBAR (S (NP-SBJ (PRP it) )
  (VP (MD would) (VP (VB sell) (NP (DT the) (NNS shares) )))))) (. .) ))
( (S (NP-SBJ (DT the) (NN market) ) (VP (VBD fell) (PP (IN in) (NP (JJ heavy) (NN trading) )))
  (. .) ))
( (S (NP-SBJ (NNS prices) ) (VP (VBD rose) (NP (CD 3) (NN %) )) (. .) ))
"""

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
def trees_run(tmp_path_factory) -> Path:
    """configs/tiny-lm.yaml trained with ``train.eval_parse`` on a three-sentence treebank: two
    validations, each with tree F1 of both layers under both rules (seconds)."""
    d = tmp_path_factory.mktemp("curves")
    (d / "trees.mrg").write_text(TREEBANK, encoding="utf-8")
    run = d / "tiny-lm-trees"
    assert main(["train", "--config", str(ROOT / "configs/tiny-lm.yaml"), "--out", str(run),
                 "--quiet", f"data.file={ROOT / 'tests/data/tiny.txt'}", "train.threads=1",
                 f"train.eval_parse={{treebank: {d / 'trees.mrg'}}}"]) == 0
    return run


@pytest.fixture(scope="module")
def page(tiny_runs, trees_run) -> Iterator[str]:
    app = App.open([tiny_runs["lm"], tiny_runs["translation"], trees_run])
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


def charts(driver) -> dict[str, dict[str, int]]:
    """The drawn charts: chart -> series -> points drawn."""
    return driver.execute_script("""
        const out = {};
        for (const fig of document.querySelectorAll("figure.chart")) {
          const series = {};
          for (const p of fig.querySelectorAll("path.series"))
            series[p.dataset.series] = Number(p.dataset.points);
          out[fig.dataset.chart] = series;
        }
        return out;""")


def legend(driver, chart: str) -> dict[str, str]:
    """A chart's legend: series -> the last value it shows."""
    items = driver.find_elements(By.CSS_SELECTOR, f"figure[data-chart={chart}] ul.legend li")
    return {li.get_attribute("data-series"): li.find_element(By.TAG_NAME, "b").text
            for li in items}


def test_training_curves_are_drawn_and_follow_the_log(browser, page, trees_run):
    valid, train = read_metrics(trees_run, "valid"), read_metrics(trees_run, "train")
    assert len(valid) == 2
    browser.get(page)
    wait = WebDriverWait(browser, 60)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready"))
    Select(browser.find_element(By.ID, "run")).select_by_value("tiny-lm-trees")
    wait.until(lambda d: "trees" in charts(d))
    rules = [f"{rule} L{k}" for rule in ("official", "split") for k in (1, 2)]
    assert charts(browser) == {"headline": {"validation": 2},
                               "trees": {r: 2 for r in rules},
                               "loss": {"training": len(train), "validation": 2}}
    head = browser.find_element(By.CSS_SELECTOR, "figure[data-chart=headline]")
    labels = [t.text for t in head.find_elements(By.CSS_SELECTOR, "text.label, text.title")]
    assert labels == ["validation perplexity", "tokens trained on", "perplexity"]
    assert legend(browser, "headline") == {"validation": f"{valid[-1]['ppl']:.1f}"}
    assert legend(browser, "trees") == {
        r: f"{100 * valid[-1]['parse_f1/' + r.replace(' ', '/')]:.1f}" for r in rules}
    assert "training finished" in browser.find_element(By.ID, "curves-status").text

    # the run trains on: a validation appended to its log is drawn without a reload
    browser.execute_script("window.notReloaded = true;")
    tokens = valid[-1]["tokens"] + 5_000
    f1 = {f"parse_f1/{rule}/L{k}": 0.6 for rule in ("official", "split") for k in (1, 2)}
    with open(trees_run / "metrics.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "valid", "epoch": 3, "step": 400, "elapsed": 9.0,
                            "tokens": tokens, "loss": 4.6, "ppl": 99.5, **f1}) + "\n")
    wait.until(lambda d: charts(d).get("headline") == {"validation": 3})
    assert browser.execute_script("return window.notReloaded === true;")
    assert charts(browser)["trees"] == {r: 3 for r in rules}
    assert legend(browser, "headline") == {"validation": "99.5"}
    assert legend(browser, "trees") == {r: "60.0" for r in rules}
    last = browser.find_elements(By.CSS_SELECTOR, "figure[data-chart=headline] circle.point")[-1]
    assert (last.get_attribute("data-tokens"), last.get_attribute("data-value")) == \
        (str(tokens), "99.5")
    status = browser.find_element(By.ID, "curves-status").text
    assert f"the last at {tokens:,} tokens" in status and "not finished" in status
