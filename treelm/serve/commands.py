"""``treelm serve``: the local page over trained runs (:mod:`treelm.serve.server`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from treelm.api.model import CHECKPOINT_HELP, CHECKPOINTS
from treelm.errors import TreelmError
from treelm.verb import Number, add_verb

SERVE_EPILOG = """examples:
  treelm serve runs/onlstm                       # then open http://127.0.0.1:8000/
  treelm serve runs/onlstm runs/de-en runs/atis-elman --port 8080
"""


def cmd_serve(args: argparse.Namespace) -> int:
    """a local web page to look at trained runs (trees, gates, translations)

    Serve a page (and the JSON endpoints of docs/serve.md) over the runs given: type a sentence and
    see the tree a language model's ON-LSTM layers induce under both tree rules with the gate levels
    of every layer, sample text and the next-symbol probabilities; a translation run's translation,
    its attention and (ON-LSTM encoder) the source tree; a tagging run's slots. Runs are opened once
    and named by their directory; nothing is fetched from the network.
    """
    from treelm.serve.server import App, make_server

    app = App.open(args.runs, args.checkpoint)
    try:
        server = make_server(app, args.host, args.port, quiet=not args.log)
    except OSError as e:
        raise TreelmError(f"cannot listen on {args.host}:{args.port} ({e.strerror})") from None
    host, port = server.server_address[:2]
    names = ", ".join(f"{r['name']} ({r['task']})" for r in app.runs())
    print(f"treelm: serving {names} at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print("treelm: warning: listening beyond this machine; anyone who reaches it can use "
              "the runs", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def add_serve(sub: Any) -> argparse.ArgumentParser:
    p = add_verb(sub, "serve", cmd_serve, epilog=SERVE_EPILOG)
    p.add_argument("runs", nargs="+", metavar="RUN", help="trained run directories")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=Number(int, at_least=0, at_most=65535), default=8000,
                   help="port (default 8000; 0: any free one)")
    p.add_argument("--checkpoint", choices=CHECKPOINTS, default="best",
                   help=CHECKPOINT_HELP.replace("of the run", "of each run"))
    p.add_argument("--log", action="store_true", help="print one line per request on stderr")
    return p
