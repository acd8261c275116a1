"""``treelm serve`` over HTTP: the endpoints answer what the API computes, bad requests get a 4xx
with one message and the server keeps serving, no path a client names is read, the page and its
files come from the server itself, a run's curves follow its growing metrics log (304 while it
does not change), and clients that go away cost nothing and print nothing. A real server on a free
port, in a thread."""

from __future__ import annotations

import http.client
import json
import math
import shutil
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import treelm
from treelm.api.model import to_nltk
from treelm.cli import main
from treelm.serve import server as server_module
from treelm.serve.endpoints import curves_view
from treelm.serve.server import MAX_BODY, App, make_server, run_names


def serving(app: App) -> tuple[tuple[str, int], server_module.Server]:
    srv = make_server(app, "127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[:2], srv


@pytest.fixture(scope="module")
def served(tiny_runs) -> Iterator[tuple[tuple[str, int], App]]:
    app = App.open([tiny_runs["lm"], tiny_runs["translation"], tiny_runs["tagging"]])
    address, srv = serving(app)
    yield address, app
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def server(served) -> tuple[str, int]:
    return served[0]


def request(server, method: str, path: str, body: bytes | str | dict | None = None,
            headers: dict | None = None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection(*server, timeout=60)
    try:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        if isinstance(data, str):
            data = data.encode()
        if headers is None:
            headers = {"Content-Type": "application/json"} if method == "POST" else {}
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read()
    finally:
        conn.close()


def post(server, method: str, **body) -> tuple[int, dict]:
    status, ctype, data = request(server, "POST", f"/api/{method}", body)
    assert ctype == "application/json"
    return status, json.loads(data)


def still_serving(server) -> None:
    status, _, data = request(server, "GET", "/api/runs")
    assert status == 200 and len(json.loads(data)["runs"]) == 3


def test_runs_are_listed_by_name_with_what_they_support(server):
    status, _, data = request(server, "GET", "/api/runs")
    runs = {r["name"]: r for r in json.loads(data)["runs"]}
    assert status == 200 and set(runs) == {"tiny-lm", "tiny-translation", "tiny-tagging"}
    assert runs["tiny-lm"]["supports"] == ["parse", "levels", "score", "generate", "probe",
                                           "curves"]
    assert runs["tiny-tagging"]["supports"] == ["tag", "curves"]
    assert runs["tiny-tagging"]["layers"] == []


def test_parse_answers_the_api_trees_under_both_rules(server, tiny_runs):
    from treelm.syntax.trees import tree_to_brackets

    m = treelm.load(tiny_runs["lm"])
    sentence = "the company said it would sell its stake in the unit"
    status, out = post(server, "parse", run="tiny-lm", sentence=sentence)
    assert status == 200 and out["tokens"] == sentence.split()
    assert out["layers"] == [1, 2] and len(out["df"]) == len(out["di"]) == 2
    lv = m.levels(sentence)
    assert np.allclose(out["df"], lv.df, atol=1e-5) and np.allclose(out["di"], lv.di, atol=1e-5)
    for style in ("official", "split"):
        for layer in (1, 2):
            got = out["trees"][style][str(layer)]
            assert to_nltk(got) == m.parse(sentence, layer=layer, style=style)[0]
            assert tree_to_brackets(got) == tree_to_brackets(lv.tree(layer, style))


def test_the_other_endpoints(server, tiny_runs):
    lm = treelm.load(tiny_runs["lm"])
    status, out = post(server, "generate", run="tiny-lm", prompt="the company", length=8, seed=2)
    assert status == 200 and out["text"] == lm.generate("the company", 8, seed=2, unk="map")
    status, out = post(server, "probe", run="tiny-lm", prefix="the", k=3)
    assert [n["symbol"] for n in out["next"]] == [s for s, _ in lm.probe("the", 3)]
    status, out = post(server, "score", run="tiny-lm", sentence="the company said")
    assert out["logprob"] == pytest.approx(lm.score("the company said")[0], abs=1e-9)
    mt = treelm.load(tiny_runs["translation"])
    status, out = post(server, "translate", run="tiny-translation", sentence="a b c d", beam=2)
    assert status == 200 and out["translation"] == mt.translate("a b c d", beam=2)[0]
    att = out["attention"]
    assert att["source"] == ["a", "b", "c", "d", "<eos>"]
    assert len(att["weights"][0]) == len(att["target"])
    assert out["source_tree"]["tokens"] == ["a", "b", "c", "d"]
    status, out = post(server, "tag", run="tiny-tagging", sentence="flights to boston")
    tagger = treelm.load(tiny_runs["tagging"])
    assert status == 200
    assert {k: out[k] for k in ("words", "tags", "slots", "intent")} == \
        tagger.tag("flights to boston")[0]


@pytest.mark.parametrize("method,body,status,message", [
    ("parse", {"run": "tiny-lm", "sentence": ""}, 400, "'sentence' is empty"),
    ("parse", {"run": "tiny-lm", "sentence": "   "}, 400, "'sentence' is empty"),
    ("parse", {"run": "tiny-lm"}, 400, "missing field 'sentence'"),
    ("parse", {"run": "tiny-lm", "sentence": " ".join(["the"] * 10_000)}, 413,
     "characters; at most"),
    ("parse", {"run": "tiny-lm", "sentence": "a " * 150}, 413, "has 150 words; at most"),
    ("parse", {"run": "nope", "sentence": "the cat"}, 404, "no run named 'nope'"),
    ("parse", {"run": "../../etc", "sentence": "the cat"}, 404, "no run named"),
    ("parse", {"run": "tiny-tagging", "sentence": "the cat"}, 400,
     "parse: not supported by this 'tagging' run; it supports tag"),
    ("translate", {"run": "tiny-lm", "sentence": "the cat"}, 400,
     "translate: not supported by this 'lm' run"),
    ("tag", {"run": "tiny-translation", "sentence": "a b"}, 400, "not supported"),
    ("parse", {"run": "tiny-lm", "sentence": 7}, 400, "'sentence' must be a string"),
    ("generate", {"run": "tiny-lm", "prompt": "the", "length": 10**6}, 400, "'length' must be"),
    ("translate", {"run": "tiny-translation", "sentence": "a", "beam": 0}, 400, "'beam' must"),
    ("nothing", {"run": "tiny-lm"}, 404, "no such endpoint"),
])
def test_bad_requests_get_one_message_and_the_server_goes_on(server, method, body, status,
                                                             message):
    got, out = post(server, method, **body)
    assert got == status and list(out) == ["error"]
    assert message in out["error"] and "\n" not in out["error"]
    assert "Traceback" not in out["error"]
    still_serving(server)


@pytest.mark.parametrize("method,path,body,headers,status", [
    ("POST", "/api/parse", "{not json", None, 400),
    ("POST", "/api/parse", "[1, 2]", None, 400),
    ("POST", "/api/parse", b"\xff\xfe", None, 400),
    ("POST", "/api/parse", "x" * (MAX_BODY + 1), None, 413),
    ("POST", "/api/parse", '{"run": "tiny-lm", "sentence": "the"}',
     {"Content-Type": "text/plain"}, 415),
    ("GET", "/api/parse", None, {}, 405),
    ("POST", "/api/runs", "{}", None, 405),
    ("POST", "/api/runs/tiny-lm/curves", "{}", None, 405),
    ("GET", "/api/runs/nope/curves", None, {}, 404),
    ("GET", "/api/runs/../../etc/curves", None, {}, 404),
    ("GET", "/api/runs/tiny-lm/curves/x", None, {}, 404),
    ("PUT", "/", "x", {}, 405),
    ("GET", "/../../etc/passwd", None, {}, 404),
    ("GET", "/static/../server.py", None, {}, 404),
    ("GET", "/static/%2e%2e/server.py", None, {}, 404),
    ("GET", "/etc/passwd", None, {}, 404),
])
def test_malformed_requests(server, method, path, body, headers, status):
    got, ctype, data = request(server, method, path, body, headers)
    assert got == status and ctype == "application/json"
    assert list(json.loads(data)) == ["error"]
    still_serving(server)


def test_the_page_and_its_files_are_served_locally(server):
    status, ctype, page = request(server, "GET", "/")
    assert status == 200 and ctype.startswith("text/html")
    html = page.decode()
    assert "/static/app.js" in html and "/static/style.css" in html
    assert "http://" not in html and "https://" not in html          # no CDN
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        status, ctype, data = request(server, "GET", f"/static/{name}")
        assert status == 200 and ctype.startswith(kind) and data
        assert b"https://" not in data


def test_one_request_at_a_time_per_run_and_many_in_parallel(server):
    results: list[int] = []

    def one(i: int) -> None:
        results.append(post(server, "parse", run="tiny-lm", sentence=f"the {i} company")[0])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 8


# ----------------------------------------------------------------------------- curves
def test_curves_answer_the_api_and_an_unchanged_log_answers_304(server, tiny_runs):
    conn = http.client.HTTPConnection(*server, timeout=60)
    try:
        conn.request("GET", "/api/runs/tiny-lm/curves")
        r = conn.getresponse()
        body, etag = json.loads(r.read()), r.getheader("ETag")
        want = treelm.load(tiny_runs["lm"]).curves()
        assert r.status == 200 and body == {"run": "tiny-lm", **curves_view(want)}
        assert etag == f'"{want.version}"'
        assert body["headline"] == "ppl" and body["done"] and body["trees"] == {}
        assert [t for t, _ in body["valid"]["ppl"]] == [t for t, _ in want.valid["ppl"]]
        assert [v for _, v in body["valid"]["ppl"]] == pytest.approx(
            [v for _, v in want.valid["ppl"]], rel=1e-5)
        # the page's poll: the same version answers 304 without a body, on the same connection
        conn.request("GET", "/api/runs/tiny-lm/curves", headers={"If-None-Match": etag})
        r = conn.getresponse()
        assert r.status == 304 and r.read() == b"" and r.getheader("ETag") == etag
        conn.request("GET", "/api/runs/tiny-lm/curves", headers={"If-None-Match": '"old"'})
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read()) == body
    finally:
        conn.close()


@pytest.fixture
def growing(lm_run, tmp_path) -> Iterator[tuple[tuple[str, int], Path]]:
    """A copy of the tiny LM run served alone, whose log a test may append to."""
    run = tmp_path / "growing"
    shutil.copytree(lm_run, run)
    address, srv = serving(App.open([run]))
    yield address, run / "metrics.jsonl"
    srv.shutdown()
    srv.server_close()


def strict_json(data: bytes) -> dict:
    """JSON as a browser's JSON.parse reads it: NaN and Infinity are not JSON."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")
    return json.loads(data, parse_constant=refuse)


def test_curves_follow_the_log_as_the_run_trains(growing):
    server, log = growing
    status, _, data = request(server, "GET", "/api/runs/growing/curves")
    before = strict_json(data)
    n = len(before["valid"]["ppl"])
    with open(log, "a", encoding="utf-8") as f:          # what a training run appends
        f.write(json.dumps({"event": "train", "epoch": 3, "step": 300, "elapsed": 9.0,
                            "tokens": 20_000, "loss": math.nan, "ppl": math.nan}) + "\n")
        f.write(json.dumps({"event": "valid", "epoch": 3, "step": 300, "elapsed": 9.5,
                            "tokens": 20_000, "loss": 4.8, "ppl": 121.5,
                            "parse_f1/official/L1": 0.31, "parse_f1/split/L2": 0.27}) + "\n")
    status, _, data = request(server, "GET", "/api/runs/growing/curves")
    after = strict_json(data)
    assert status == 200 and len(after["valid"]["ppl"]) == n + 1 and not after["done"]
    assert after["valid"]["ppl"][-1] == [20_000, 121.5]
    assert after["train"]["loss"][-1] == [20_000, None]        # a diverged value: null
    assert after["trees"] == {"official": {"1": [[20_000, 0.31]]},
                              "split": {"2": [[20_000, 0.27]]}}


# ----------------------------------------------------------------------------- clients that leave
def _client(address: tuple[str, int], data: bytes, reset: bool) -> None:
    """Send ``data`` and leave without reading: a plain close (FIN), or ``reset`` (RST, as a
    killed client's system sends), after which the server's reads and writes fail."""
    s = socket.create_connection(address, timeout=10)
    if reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(data)
    s.close()


def _settle(threads: int) -> None:
    """Wait until the server's threads for the clients that left have ended."""
    deadline = time.monotonic() + 60
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)


def test_clients_that_go_away_cost_nothing_and_print_nothing(served, capfd, monkeypatch):
    address, app = served
    calls: list[str] = []
    real = server_module.ENDPOINTS["generate"]
    monkeypatch.setitem(server_module.ENDPOINTS, "generate",
                        lambda m, body: calls.append(body["prompt"]) or real(m, body))
    body = json.dumps({"run": "tiny-lm", "prompt": "the", "length": 50}).encode()
    req = (b"POST /api/generate HTTP/1.1\r\nHost: here\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body
    threads = threading.active_count()
    capfd.readouterr()
    # the run is busy: ten requests wait for it, and their clients give up before it is free
    with app.locks["tiny-lm"]:
        for reset in (False, True) * 5:
            _client(address, req, reset)
        time.sleep(0.5)
    _settle(threads)
    assert calls == []                  # none of them was computed
    # clients that leave mid-request (in the headers, in the body) or while it is computed
    for reset in (False, True):
        for cut in (20, len(req) - 10, len(req)):
            _client(address, req[:cut], reset)
    _settle(threads)
    status, out = post(address, "generate", run="tiny-lm", prompt="the company", length=5)
    assert status == 200 and out["text"] and calls[-1] == "the company"
    still_serving(address)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Error" not in err and err == ""


def test_a_silent_connection_is_closed_quietly(tiny_runs, capfd):
    """A client that connects and sends nothing (or half a request) does not hold a thread
    forever: the connection is closed after the handler's timeout, without a word."""
    srv = make_server(App.open([tiny_runs["tagging"]]), "127.0.0.1", 0)
    srv.RequestHandlerClass.timeout = 0.3
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    capfd.readouterr()
    try:
        for data in (b"", b"POST /api/tag HTTP/1.1\r\nContent-Length: 40\r\n\r\n{"):
            s = socket.create_connection(srv.server_address[:2], timeout=10)
            s.sendall(data)
            assert s.recv(1024) == b""                    # closed by the server, unanswered
            s.close()
        status, _, _ = request(srv.server_address[:2], "GET", "/api/runs")
        assert status == 200
    finally:
        srv.shutdown()
        srv.server_close()
    assert capfd.readouterr().err == ""


def test_run_names_are_unique():
    assert run_names(["a/onlstm", "b/onlstm", "c/lstm", "d/onlstm"]) == \
        ["onlstm", "onlstm-2", "lstm", "onlstm-3"]


def test_serve_refuses_what_is_not_a_run(tmp_path, capsys):
    assert main(["serve", str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("treelm: error:")
    with pytest.raises(SystemExit) as stop:          # a usage error, as the parser reports it
        main(["serve", str(tmp_path), "--port", "70000"])
    assert stop.value.code == 2
    assert "argument --port: must be an integer in [0, 65535], got 70000" in \
        capsys.readouterr().err


def test_the_latency_benchmark_runs_and_writes_where_told(tiny_runs, tmp_path, root):
    """benchmarks/serve_latency.py on the tiny run, a few requests, to a path under tmp (the
    recorded figure comes from a ptb-onlstm-cpu run, alone on the machine)."""
    import subprocess
    import sys

    out = tmp_path / "latency.json"
    subprocess.run([sys.executable, str(root / "benchmarks/serve_latency.py"),
                    str(tiny_runs["lm"]), "--requests", "3", "--warmup", "1", "--out",
                    str(out)], check=True, capture_output=True, timeout=300)
    rec = json.loads(out.read_text())
    assert rec["requests"] == 3 and rec["words"] == 20 and len(rec["sentence"].split()) == 20
    assert 0 < rec["min_ms"] <= rec["median_ms"] <= rec["p95_ms"] <= rec["max_ms"]
    assert rec["meets_target"] == (rec["median_ms"] <= 100)
