#!/usr/bin/env python3
"""The peer of ingest's tus uploads in the benchmarks: a card uploaded with tuspy, as a user would script it.

Every regular file under CARD (links not followed, in sorted path order) is uploaded to the
tus 1.0 server whose creation URL is URL, with tuspy (tus.io's Python client, PyPI `tuspy`),
in chunks of 16 MiB: ingest's default tus chunk size, so both send the same PATCHes.

It is sequential, one file after another, because tuspy's uploader is: it has no concurrency
of its own, and a user scripting it would not add any.

Each upload carries `filename` (the file's path under CARD) and `filetype`
(application/octet-stream) as its metadata; tuspyserver answers a HEAD with 400 without
them. No retries (tuspy's default): any failure ends the run with exit status 1.

It needs the project's venv (`make venv`: tuspy).

Usage
-----
    tus_peer.py CARD URL
"""

from __future__ import annotations

import os
import sys

from tusclient import client

CHUNK_SIZE = 16 << 20  # ingest's default [tus] chunk_size


def card_files(card: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(card):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append(path)
    return found


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: tus_peer.py CARD URL", file=sys.stderr)
        return 2
    card, url = sys.argv[1], sys.argv[2]
    tus = client.TusClient(url)
    files = card_files(card)
    for path in files:
        name = os.path.relpath(path, card)
        try:
            uploader = tus.uploader(file_path=path, chunk_size=CHUNK_SIZE,
                                    metadata={"filename": name, "filetype": "application/octet-stream"})
            uploader.upload()
        except Exception as error:  # tuspy raises TusCommunicationError, TusUploadFailed, OSError…
            print(f"tus_peer: {name}: {type(error).__name__}: {error}", file=sys.stderr)
            return 1
    print(f"tus_peer: {len(files)} files uploaded", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
