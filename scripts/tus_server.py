#!/usr/bin/env python3
"""A real tus 1.0 server on 127.0.0.1 for the tests of ingest's tus client.

tuspyserver's FastAPI router (creation, expiration, termination, …) under uvicorn, storing
uploads in DIR: each upload is DIR/ID (its bytes) beside DIR/ID.info (JSON: "metadata",
"size", "offset", "expires", …). The creation URL is http://127.0.0.1:PORT/files/.

With --bearer TOKEN every request without `Authorization: Bearer TOKEN` is answered 401
before it reaches tuspyserver. (tuspyserver's own `auth` dependency runs after the PATCH
route has already written the body, so it cannot prove that a refused chunk stored nothing;
a middleware in front of the app can.)

It needs the project's venv (`make venv`: tuspyserver, uvicorn), and is not a SwiftPM
target: Tests/IngestTestSupport/TusServer.swift starts it with the venv's python.

Usage
-----
    tus_server.py --dir DIR [--port 0] [--bearer TOKEN] [--days-to-keep N]

--port 0 (the default) lets the system pick a free port, so that tests started at the same
time never race for one. The first line on stdout (flushed at once), once the socket
listens, names it:

    listening 127.0.0.1:PORT

SIGTERM or SIGINT stops it (uvicorn's graceful shutdown).
"""

from __future__ import annotations

import argparse
import socket
import sys

import uvicorn
from fastapi import FastAPI
from tuspyserver import create_tus_router


class BearerGate:
    """ASGI middleware: a request whose Authorization is not `Bearer TOKEN` gets a 401."""

    def __init__(self, app, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"tus-resumable", b"1.0.0")]})
            await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
            return
        await self.app(scope, receive, send)


def main() -> int:
    parser = argparse.ArgumentParser(description="tuspyserver on 127.0.0.1 for tests")
    parser.add_argument("--dir", required=True, help="where uploads and their .info files are stored")
    parser.add_argument("--port", type=int, default=0, help="0: a free port, printed on the first line")
    parser.add_argument("--bearer", help="require Authorization: Bearer TOKEN on every request")
    parser.add_argument("--days-to-keep", type=int, default=5, help="an unfinished upload's expiry")
    args = parser.parse_args()

    app = FastAPI()
    app.include_router(create_tus_router(prefix="files", files_dir=args.dir, days_to_keep=args.days_to_keep))
    asgi = BearerGate(app, args.bearer) if args.bearer else app

    # Bound and listening here, before uvicorn runs, so that the port can be printed and a
    # client that connects at once waits in the backlog instead of being refused.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    print(f"listening 127.0.0.1:{listener.getsockname()[1]}", flush=True)

    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", access_log=False))
    server.run(sockets=[listener])
    return 0


if __name__ == "__main__":
    sys.exit(main())
