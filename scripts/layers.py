#!/usr/bin/env python3
"""make layers: each folder of Sources/IngestKit uses only the folders below it, and only the
system call layer imports Glibc.

The folders form one order, from plain values and system calls at the bottom to the
pipeline that wires everything at the top (docs/design.md, "The layers", shows it). A folder
may use what any folder below it declares, never what one above declares: so the parts can be
read, tested and replaced from the bottom up, and no change to a low part has to know a high
one.

How it checks, on each file's code with its string literals emptied first (a `//` inside
"http://…" starts no comment; what `\\(…)` interpolates stays code) and then its `//` and
`/* */` comments removed:
- Types. Every type declared at the top level of a file (struct, class, enum, protocol,
  actor, typealias) belongs to its folder; every capitalised word that names a type of
  another folder is a use of that folder.
- Functions and extension members. A top-level `func`, and a `func`, `var` or `let`
  declared directly in an `extension` (static or not), belongs to its folder too (unless
  `private` or `fileprivate`, which no other file can use); `name(` or `.name` in a folder below is a use of it. To keep a common name from
  passing for another's, only names declared (that way) in exactly one folder count, and a
  name any folder at or below the user declares in any way (a member of any type, a local
  function or variable, a parameter, an enum case) is not counted as a use there.
- Glibc. `import Glibc` is allowed only in the files of ``GLIBC_ALLOWED``: the system call
  layer (Support/System) and the files whose point is a C API (libudev, libcurl). Every
  other file calls the system through Support/System, where errno becomes a typed error and
  an interrupted call is retried in one place.

A use of a folder above, or a Glibc import outside the list, is reported with the file, the
name and the fix, and the script exits 1. A folder not in the order is an error too, so a new
one must be placed.

  layers.py [--graph] [ROOT]    --graph prints every use between folders; ROOT is the
                                library's folder (default: Sources/IngestKit)
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
    "Tus",        # the tus 1.0 resumable-upload client: over HTTP, with S3's retry policy
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

# The files that may import Glibc, relative to ROOT: the system call layer, and the files
# whose point is a C API.
GLIBC_ALLOWED = {
    "Support/System/Errno.swift",            # errno and its numbers
    "Support/System/Syscalls.swift",         # the calls by path and of the process
    "Support/System/FileDescriptor.swift",   # the calls on an open file
    "Support/System/DirectoryReader.swift",  # opendir/readdir
    "Support/System/ShellCommand.swift",     # posix_spawn, pipes, poll, signals of a child
    "Support/System/SystemdNotifier.swift",  # an AF_UNIX datagram socket
    "Volume/Udev.swift",                     # libudev's monitor, its pipe and poll
    "HTTP/CurlTransport+Loop.swift",         # libcurl's multi handle, eventfd and poll
}

DEFAULT_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources", "IngestKit")

MODIFIERS = (
    r"(?:@\w+(?:\([^)\n]*\))?\s+)*"
    r"(?:(?:public|internal|fileprivate|private|package|open|final|indirect|nonisolated|static|class|mutating|"
    r"nonmutating|override|convenience|required|lazy|weak|unowned|dynamic|consuming|borrowing|"
    r"(?:public|internal|fileprivate|private|package)\(set\))\s+)*"
)
TYPE_DECLARATION = re.compile(r"^" + MODIFIERS + r"(?:struct|class|enum|protocol|actor|typealias)\s+([A-Z]\w*)", re.M)
FUNCTION = re.compile(r"^(" + MODIFIERS + r")func\s+(\w+)", re.M)
EXTENSION = re.compile(r"^(" + MODIFIERS + r")extension\b", re.M)
MEMBER = re.compile(r"^\s*(" + MODIFIERS + r")(?:func|var|let)\s+(\w+)", re.M)
PRIVATE = re.compile(r"\b(?:private|fileprivate)\b(?!\(set\))")
# Any name a file declares, at any depth: functions, variables, constants (also in tuple
# patterns and `if let`), enum cases, parameters (`label name:` and `name:` before a type).
ANY_DECLARED = [
    re.compile(r"\b(?:func|var|let|case)\s+(\w+)"),
    re.compile(r"\bcase\s+[^:\n]*"),  # `case a, b(x), c`: handled in declared_names
    re.compile(r"[(,]\s*(?:\w+\s+)?(\w+)\s*:\s*(?:inout\s+|@escaping\s+|@Sendable\s+|sending\s+|borrowing\s+|consuming\s+)*[\w(\[]"),
    re.compile(r"\{\s*(?:\[[^\]]*\]\s*)?\(?((?:\w+\s*,\s*)*\w+)\)?\s+in\b"),  # closure parameters
    re.compile(r"\b(?:let|var)\s*\(((?:\s*\w+\s*,?)+)\)"),  # let (a, b) = …
]
WORD = re.compile(r"\b[A-Z]\w*\b")
CALLED = re.compile(r"(?<![\w.])(\w+)\s*\(")  # name(
MEMBER_USE = re.compile(r"\.\s*([A-Za-z_]\w*)")  # .name
GLIBC_IMPORT = re.compile(r"^\s*(?:@\w+\s+)*import\s+(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?Glibc\b", re.M)


CODE_SPECIAL = re.compile(r'[/"#()]')
STRING_SPECIAL = re.compile(r'["\\]')


def strip_code(text: str) -> str:
    """The code of a Swift file: string literals emptied ("" or \"\"\"\"\"\", interpolated
    code kept), then `//` and `/* */` (nested) comments removed. Newlines are kept, so line
    numbers stay."""
    out: list[str] = []
    i, n = 0, len(text)
    # A stack of contexts: ("code", parens) for code (parens counts `(` inside an
    # interpolation, to find its end), ("string", hashes, triple) inside a literal.
    stack: list[tuple] = [("code", 0)]
    while i < n:
        top = stack[-1]
        if top[0] == "code":
            # Copy plain code up to the next character that may start or end something.
            stop = CODE_SPECIAL.search(text, i)
            end = stop.start() if stop else n
            out.append(text[i:end])
            i = end
            if i == n:
                break
        else:
            stop = STRING_SPECIAL.search(text, i)
            end = stop.start() if stop else n
            out.append("\n" * text.count("\n", i, end))
            i = end
            if i == n:
                break
        c = text[i]
        if top[0] == "code":
            if text.startswith("//", i):
                end = text.find("\n", i)
                i = n if end == -1 else end
                continue
            if text.startswith("/*", i):
                depth, i = 1, i + 2
                while i < n and depth:
                    if text.startswith("/*", i):
                        depth, i = depth + 1, i + 2
                    elif text.startswith("*/", i):
                        depth, i = depth - 1, i + 2
                    else:
                        if text[i] == "\n":
                            out.append("\n")
                        i += 1
                out.append(" ")
                continue
            match = re.compile(r'(#*)("""|")').match(text, i)
            if match and (match.group(1) or c == '"'):
                hashes, quote = len(match.group(1)), match.group(2)
                out.append(quote)
                stack.append(("string", hashes, quote == '"""'))
                i = match.end()
                continue
            if len(stack) > 1:  # inside an interpolation
                if c == "(":
                    stack[-1] = ("code", top[1] + 1)
                elif c == ")":
                    if top[1] == 0:
                        stack.pop()
                        i += 1
                        continue
                    stack[-1] = ("code", top[1] - 1)
            out.append(c)
            i += 1
            continue
        _, hashes, triple = top
        closing = ('"""' if triple else '"') + "#" * hashes
        if text.startswith(closing, i):
            out.append('"""' if triple else '"')
            stack.pop()
            i += len(closing)
            continue
        escape = "\\" + "#" * hashes
        if text.startswith(escape, i):
            after = i + len(escape)
            if text.startswith("(", after):
                stack.append(("code", 0))
                out.append(" ")
                i = after + 1
                continue
            i = after + 1  # an escaped character
            continue
        if c == "\n":
            out.append("\n")
        i += 1
    return "".join(out)


def extension_members(code: str) -> set[str]:
    """The names a file declares directly in its extensions' bodies, for other files to use
    (not `private` or `fileprivate`, nor in a private extension)."""
    names: set[str] = set()
    for match in EXTENSION.finditer(code):
        if PRIVATE.search(match.group(1)):
            continue
        start = code.find("{", match.end())
        if start == -1:
            continue
        depth, i = 1, start + 1
        body_start = i
        while i < len(code) and depth:
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
            i += 1
        body = code[body_start : i - 1]
        # Only the body's own level: blank out nested braces.
        flat, level = [], 0
        for ch in body:
            if ch == "{":
                level += 1
            if level == 0 or ch == "\n":
                flat.append(ch)
            if ch == "}":
                level -= 1
        names.update(name for modifiers, name in MEMBER.findall("".join(flat)) if not PRIVATE.search(modifiers))
    return names


def declared_names(code: str) -> set[str]:
    """Every name a file declares, at any depth and of any kind."""
    names: set[str] = set()
    names.update(ANY_DECLARED[0].findall(code))
    for clause in ANY_DECLARED[1].findall(code):
        names.update(re.findall(r"(?:^case|,)\s*(\w+)", clause))
    names.update(ANY_DECLARED[2].findall(code))
    for group in ANY_DECLARED[3].findall(code) + ANY_DECLARED[4].findall(code):
        names.update(word.strip() for word in group.split(","))
    return names


def sources(root: str) -> dict[str, list[tuple[str, str]]]:
    """Folder → [(path, text)] for every Swift file beneath it."""
    folders: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for folder in sorted(os.listdir(root)):
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            continue
        for directory, _, names in os.walk(top):
            for name in sorted(names):
                if name.endswith(".swift"):
                    path = os.path.join(directory, name)
                    with open(path, encoding="utf-8") as source:
                        folders[folder].append((path, source.read()))
    return folders


def main(arguments: list[str]) -> int:
    graph = "--graph" in arguments
    given = [argument for argument in arguments if argument != "--graph"]
    root = os.path.abspath(given[0] if given else DEFAULT_ROOT)
    folders = sources(root)
    unplaced = sorted(set(folders) - set(ORDER))
    if unplaced:
        print(f"layers: folders not in the layer order of scripts/layers.py: {', '.join(unplaced)}. "
              "Add each where it belongs (it may use only the folders before it).", file=sys.stderr)
        return 1
    rank = {folder: index for index, folder in enumerate(ORDER)}
    code = {path: strip_code(text) for files in folders.values() for path, text in files}

    type_owner: dict[str, str] = {}
    function_owners: dict[str, set[str]] = defaultdict(set)
    declared_in: dict[str, set[str]] = defaultdict(set)  # folder → every name it declares
    for folder, files in folders.items():
        for path, _ in files:
            text = code[path]
            for name in TYPE_DECLARATION.findall(text):
                type_owner.setdefault(name, folder)
            top_level = [m.group(2) for m in FUNCTION.finditer(text)
                         if not text[m.start()].isspace() and not PRIVATE.search(m.group(1))]
            for name in set(top_level) | extension_members(text):
                function_owners[name].add(folder)
            declared_in[folder] |= declared_names(text)
    function_owner = {name: next(iter(owners)) for name, owners in function_owners.items() if len(owners) == 1}
    # Names declared at or below each folder, which a use there may mean instead.
    at_or_below: dict[str, set[str]] = {}
    seen: set[str] = set()
    for folder in ORDER:
        seen = seen | declared_in.get(folder, set())
        at_or_below[folder] = seen

    uses: dict[tuple[str, str], set[str]] = defaultdict(set)
    problems: list[str] = []
    base = os.path.join(root, "..", "..")
    for folder, files in folders.items():
        for path, _ in files:
            text = code[path]
            relative = os.path.relpath(path, base)
            in_root = os.path.relpath(path, root)
            if GLIBC_IMPORT.search(text) and in_root not in GLIBC_ALLOWED:
                problems.append(f"{relative}: imports Glibc; call it through Support/System "
                                "(FileDescriptor, System, DirectoryReader: add the wrapper there if it is missing)")
            for word in sorted(set(WORD.findall(text))):
                used = type_owner.get(word)
                if used is None or used == folder:
                    continue
                uses[(folder, used)].add(word)
                if rank[used] > rank[folder]:
                    problems.append(f"{relative}: {folder} uses {word} of {used}, which is above it")
            called = set(CALLED.findall(text)) | set(MEMBER_USE.findall(text))
            for name in sorted(called & function_owner.keys()):
                used = function_owner[name]
                if rank[used] <= rank[folder] or name in at_or_below[folder]:
                    continue
                uses[(folder, used)].add(name)
                problems.append(f"{relative}: {folder} uses {name} of {used}, which is above it")
    if graph:
        for (folder, used), words in sorted(uses.items(), key=lambda item: (rank[item[0][0]], rank[item[0][1]])):
            print(f"{folder} -> {used}: {' '.join(sorted(words))}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(f"layers: {len(problems)} problem{'s' if len(problems) > 1 else ''}. A use of a folder above: move what "
              "it uses down to a folder both can use, or the code that uses it up (order, bottom first: "
              + " < ".join(ORDER) + "). A Glibc import: make the call through Support/System.", file=sys.stderr)
        return 1
    print(f"layers: {sum(len(files) for files in folders.values())} files in {len(folders)} folders, "
          "no folder uses one above it, Glibc imported only by the system call layer and C API shims")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
