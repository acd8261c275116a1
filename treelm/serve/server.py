"""The HTTP side of ``treelm serve``: a page and JSON endpoints over runs opened with the API.

Shape. The runs are opened once, at start, from the paths on the command line, and named by their
directory (``runs/onlstm`` -> ``onlstm``; a repeated name gets ``-2``, ``-3``…). A request names a
run by that name only: the server never opens a path a client sends, and it serves its page and
scripts from a fixed table read at start (nothing from a CDN: the page works offline). Standard
library only (``http.server.ThreadingHTTPServer``); each run's object holds a lock, so one request
at a time computes on a run while the others wait.

Requests. ``GET /`` the page, ``GET /static/<file>`` its script and style, ``GET /api/runs`` the
runs with what each supports, ``GET /api/runs/<name>/curves`` a run's training curves (the API's
``curves``: its metrics log as it grows, with an ``ETag`` so that a page polling an unchanged log
gets ``304`` and no body), and ``POST /api/<method>`` with a JSON object (docs/serve.md lists the
fields): ``parse``, ``score``, ``generate``, ``probe``, ``tag``, ``translate``, each computed by
:mod:`treelm.serve.endpoints`. Input is bounded (``MAX_BODY`` bytes; per field, ``MAX_CHARS``
characters and ``MAX_WORDS`` whitespace-separated words per sentence, ``MAX_LENGTH`` generated
symbols, ``MAX_BEAM``, ``MAX_TOP``). Every error is
``{"error": "<one line>"}`` with a 4xx status (a bug: 500 with the exception's type, the traceback
on the server's stderr only), and the server goes on serving.

Clients that go away. A client that closes its connection before its answer (a closed tab, a
script's timeout) costs nothing and prints nothing: a request whose client has gone by the time
its run is free is not computed, an answer that cannot be written is dropped, and a connection
idle for ``IDLE_S`` seconds is closed so that abandoned ones do not hold a thread.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

from treelm.api.model import TreelmModel, UnsupportedMethodError, load
from treelm.errors import TreelmError
from treelm.serve.endpoints import ENDPOINTS, RequestError, curves_view, defaults

MAX_BODY = 64 * 1024        # bytes of one request body (its fields: treelm.serve.endpoints)
IDLE_S = 120                # seconds a connection may stay silent before it is closed
STATIC = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
          "style.css": "text/css; charset=utf-8"}


class Answer(NamedTuple):
    """An HTTP answer: status, content type, body and extra headers."""

    status: int
    ctype: str
    data: bytes
    headers: tuple[tuple[str, str], ...] = ()


class ClientGone(Exception):
    """The client closed its connection before its answer: nothing to compute or write."""


def run_names(paths: Sequence[str | Path]) -> list[str]:
    """A name per run directory: its last component, ``-2``, ``-3``… appended on repeats."""
    names: list[str] = []
    for p in paths:
        base = Path(p).name or Path(p).resolve().name or "run"      # "." names its folder
        name, k = base, 1
        while name in names:
            k += 1
            name = f"{base}-{k}"
        names.append(name)
    return names


class App:
    """The runs and the answer to each request, apart from HTTP (``handle``)."""

    def __init__(self, models: dict[str, TreelmModel]) -> None:
        self.models = models
        here = Path(__file__).parent / "static"
        self.static = {name: (here / name).read_bytes() for name in STATIC}
        # one computation per run at a time (as the API's own lock), taken here so that a
        # request whose client left while it waited is dropped before it computes
        self.locks = {name: threading.Lock() for name in models}
        self._curves: dict[str, tuple[str, bytes]] = {}     # run -> (version, its JSON)

    @classmethod
    def open(cls, paths: Sequence[str | Path], checkpoint: str = "best") -> App:
        return cls({name: load(p, checkpoint) for name, p in zip(run_names(paths), paths)})

    def runs(self) -> list[dict[str, Any]]:
        return [{"name": name, "task": m.task, "supports": list(m.supports),
                 "layers": list(m.layers), **defaults(m)} for name, m in self.models.items()]

    def get(self, path: str, etag: str | None = None) -> Answer:
        """The answer to ``GET path``; ``etag``: the request's ``If-None-Match``."""
        if path in ("/", "/index.html"):
            return Answer(200, STATIC["index.html"], self.static["index.html"])
        if path.startswith("/static/") and path[len("/static/"):] in STATIC:
            name = path[len("/static/"):]
            return Answer(200, STATIC[name], self.static[name])
        if path == "/api/runs":
            return _json(200, {"runs": self.runs()})
        parts = path.split("/")
        if len(parts) == 5 and parts[:3] == ["", "api", "runs"] and parts[4] == "curves":
            return self.curves(parts[3], etag)
        if path.startswith("/api/") and path[len("/api/"):] in ENDPOINTS:
            raise RequestError(405, f"{path} takes POST with a JSON object")
        raise RequestError(404, f"no such page: {path}")

    def curves(self, name: str, etag: str | None = None) -> Answer:
        """A run's curves (``curves_view``), or ``304`` with no body when ``etag`` names the
        version of the log the client has: polling an unchanged log costs one ``stat``."""
        if name not in self.models:
            raise RequestError(404, f"no run named {name!r}; runs: {', '.join(self.models)}")
        try:
            c = self.models[name].curves()
        except TreelmError as e:        # a log that cannot be read now; the page asks again
            raise RequestError(503, str(e)) from None
        tag = f'"{c.version}"'
        headers = (("ETag", tag),)
        if etag is not None and tag in [t.strip() for t in etag.split(",")]:
            return Answer(304, "application/json", b"", headers)
        cached = self._curves.get(name)
        if cached is None or cached[0] != c.version:
            cached = (c.version, _json(200, {"run": name, **curves_view(c)}).data)
            self._curves[name] = cached
        return Answer(200, "application/json", cached[1], headers)

    def post(self, path: str, raw: bytes,
             gone: Callable[[], bool] = lambda: False) -> Answer:
        """The answer to ``POST path`` with body ``raw``; ``gone()`` tells whether the client
        has left (asked once the run is free: a request of a gone client is not computed)."""
        method = path[len("/api/"):] if path.startswith("/api/") else ""
        if method not in ENDPOINTS:
            if path == "/api/runs" or (path.startswith("/api/runs/")
                                       and path.endswith("/curves")):
                raise RequestError(405, f"{path} takes GET")
            raise RequestError(404, f"no such endpoint: {path}")
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise RequestError(400, f"the body is not JSON ({e})") from None
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        name = body.get("run")
        if name is None and len(self.models) == 1:
            name = next(iter(self.models))
        if not isinstance(name, str) or name not in self.models:
            known = ", ".join(self.models)
            raise RequestError(404, f"no run named {name!r}; runs: {known}")
        m = self.models[name]
        try:
            with self.locks[name]:
                if gone():
                    raise ClientGone
                return _json(200, {"run": name, **ENDPOINTS[method](m, body)})
        except UnsupportedMethodError as e:
            raise RequestError(400, f"run {name!r}: {e}") from None
        except TreelmError as e:
            raise RequestError(400, str(e)) from None


def _json(status: int, obj: Any) -> Answer:
    return Answer(status, "application/json",
                  json.dumps(obj, ensure_ascii=False).encode("utf-8"))


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; every answer but a 304 has a Content-Length."""

    protocol_version = "HTTP/1.1"
    server_version = "treelm"
    app: App            # set on the subclass made by make_server
    quiet = True
    timeout = IDLE_S    # the socket's: a connection silent this long is closed (TimeoutError)

    def handle(self) -> None:
        # A client that closed or reset its connection, or went silent, ends it here, quietly:
        # without this, each such client printed a BrokenPipeError or ConnectionResetError
        # traceback (two when the 500 answer to the first also failed), and nothing is owed to
        # a client that is not there
        try:
            super().handle()
        except (ConnectionError, TimeoutError, ClientGone):
            self.close_connection = True

    def _answer(self, a: Answer) -> None:
        self.send_response(a.status)
        if a.status != 304:             # "not modified" has no body, so no length or type
            self.send_header("Content-Type", a.ctype)
            self.send_header("Content-Length", str(len(a.data)))
        for key, value in a.headers:
            self.send_header(key, value)
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        # the page's own script and style only: nothing is fetched from elsewhere
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and a.status != 304:
            self.wfile.write(a.data)

    def _error(self, status: int, message: str) -> None:
        self._answer(_json(status, {"error": message}))

    def _serve(self, work: Callable[[], Answer]) -> None:
        try:
            answer = work()
        except RequestError as e:
            answer = _json(e.status, {"error": str(e)})
        except (ConnectionError, TimeoutError, ClientGone):
            raise                       # the client left while it was read: handle() ends it
        except Exception as e:          # a bug: the client gets one line, the log the rest
            traceback.print_exc(file=sys.stderr)
            answer = _json(500, {"error": f"internal error ({type(e).__name__}); "
                                          f"see the server's log"})
        self._answer(answer)            # a client gone by now: handle() drops the answer

    def _gone(self) -> bool:
        """Whether the client has closed its side or reset the connection: the socket polls
        readable and a peek (which leaves a pipelined next request unread) reads end-of-file,
        or fails. Unknown (no ``poll`` on this system): ``False``."""
        if not hasattr(select, "poll"):
            return False
        try:
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._serve(lambda: self.app.get(self._path(), self.headers.get("If-None-Match")))

    do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802
        def work() -> Answer:
            size = self.headers.get("Content-Length")
            if size is None or not size.isdigit():
                self.close_connection = True
                raise RequestError(411, "a POST needs a Content-Length")
            if int(size) > MAX_BODY:
                self.close_connection = True        # the body is left unread
                raise RequestError(413, f"the body has {size} bytes; at most {MAX_BODY}")
            body = self.rfile.read(int(size))
            if len(body) < int(size):               # the client closed while it was sending
                raise ClientGone
            # JSON only: another page in the browser cannot post here without a CORS preflight,
            # which is not answered
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise RequestError(415, "a POST body must be sent as Content-Type: "
                                   "application/json")
            return self.app.post(self._path(), body, self._gone)

        self._serve(work)

    def _not_allowed(self) -> None:
        self.close_connection = True
        self._error(405, f"{self.command} is not served; use GET or POST")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if not self.quiet:
            super().log_message(format, *args)


class Server(ThreadingHTTPServer):
    """The threading server, quiet about clients that went away."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # what Handler.handle did not catch (a socket closing under the server's own cleanup):
        # a client that left is not an error of the server's
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def make_server(app: App, host: str = "127.0.0.1", port: int = 8000,
                quiet: bool = True) -> Server:
    """A threading server of ``app`` bound to ``host:port`` (port 0: any free one; the bound
    port is ``server.server_address[1]``). ``serve_forever()`` runs it."""
    handler = type("TreelmHandler", (Handler,), {"app": app, "quiet": quiet})
    return Server((host, port), handler)
