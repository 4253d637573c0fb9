#!/usr/bin/env python3
"""make layers: each folder of Sources/IngestKit uses only the folders below it.

The folders form one order, from plain values and system calls at the bottom to the
pipeline that wires everything at the top (docs/design.md, "The layers", shows it). A folder
may use the types of any folder below it, never of one above: so the parts can be read,
tested and replaced from the bottom up, and no change to a low part has to know a high one.

How it checks: every type declared at the top level of a file (struct, class, enum, protocol,
actor, typealias) belongs to its folder; then every capitalised word in a file's code
(comments and string literals removed) that names a type of another folder is a use of that
folder. A use of a folder above is reported with the file, the type and the fix, and the
script exits 1. A folder not in the order is an error too, so a new one must be placed.

  layers.py [--graph]    --graph prints every use between folders
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict

# Bottom first. Each may use the ones before it.
ORDER = [
    "Support",    # system calls, descriptors, errno, buffers, threads, byte counts
    "Values",     # plain values: card paths, fingerprints, exit statuses, the run's errors
    "Scan",       # the tree walk and its rules
    "Volume",     # mount table, udev identity, mounting a card
    "HTTP",       # the libcurl transport
    "S3",         # SigV4, credentials, the S3 client, part digests and S3's limits
    "Multipart",  # part plans, part checksums, the upload state machine: no I/O
    "Custody",    # ASC MHL manifests of a card, their chain, C4 ids: no I/O
    "Tags",       # labels, metadata, key templates, scene files
    "Stage",      # the staging area and the stager
    "Journal",    # SQLite: files, uploads, parts; the state directory
    "Report",     # events, their sinks, summaries, metrics
    "Upload",     # the object uploader, transfer limits
    "Config",     # the TOML configuration and what it fills in
    "Pipeline",   # the run: ingest, resume, rescan, watch
]

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources", "IngestKit")
DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*"
    r"(?:(?:public|internal|fileprivate|private|package|final|indirect|nonisolated)\s+)*"
    r"(?:struct|class|enum|protocol|actor|typealias)\s+([A-Z]\w*)",
    re.M,
)
COMMENT = re.compile(r"//.*")
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
WORD = re.compile(r"\b[A-Z]\w*\b")


def sources() -> dict[str, list[tuple[str, str]]]:
    """Folder → [(path, text)] for every Swift file beneath it."""
    folders: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for folder in sorted(os.listdir(ROOT)):
        top = os.path.join(ROOT, folder)
        if not os.path.isdir(top):
            continue
        for directory, _, names in os.walk(top):
            for name in sorted(names):
                if name.endswith(".swift"):
                    path = os.path.join(directory, name)
                    with open(path, encoding="utf-8") as source:
                        folders[folder].append((path, source.read()))
    return folders


def main() -> int:
    folders = sources()
    unplaced = sorted(set(folders) - set(ORDER))
    if unplaced:
        print(f"layers: folders not in the layer order of scripts/layers.py: {', '.join(unplaced)}. "
              "Add each where it belongs (it may use only the folders before it).", file=sys.stderr)
        return 1
    owner: dict[str, str] = {}
    for folder, files in folders.items():
        for _, text in files:
            for match in DECLARATION.finditer(text):
                owner.setdefault(match.group(1), folder)
    rank = {folder: index for index, folder in enumerate(ORDER)}
    uses: dict[tuple[str, str], set[str]] = defaultdict(set)
    upward: list[str] = []
    for folder, files in folders.items():
        for path, text in files:
            code = STRING.sub('""', COMMENT.sub("", text))
            for word in sorted(set(WORD.findall(code))):
                used = owner.get(word)
                if used is None or used == folder:
                    continue
                uses[(folder, used)].add(word)
                if rank[used] > rank[folder]:
                    relative = os.path.relpath(path, os.path.join(ROOT, "..", ".."))
                    upward.append(f"{relative}: {folder} uses {word} of {used}, which is above it")
    if "--graph" in sys.argv[1:]:
        for (folder, used), words in sorted(uses.items(), key=lambda item: (rank[item[0][0]], rank[item[0][1]])):
            print(f"{folder} -> {used}: {' '.join(sorted(words))}")
    if upward:
        print("\n".join(upward), file=sys.stderr)
        print(f"layers: {len(upward)} use{'s' if len(upward) > 1 else ''} of a folder above. Move the type down to a folder both can use, "
              "or the code that uses it up (order, bottom first: " + " < ".join(ORDER) + ")", file=sys.stderr)
        return 1
    print(f"layers: {sum(len(files) for files in folders.values())} files in {len(folders)} folders, "
          "no folder uses one above it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
