#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for loopback tests of ingest's S3 client.

It sits between a client and an S3 server (SeaweedFS) on 127.0.0.1 and forwards
requests one by one, keep-alive included, while rules pick requests to break:
connection resets in the middle of a body, answers that never come, 503 SlowDown,
500 InternalError, answers cut off halfway, requests held back (a slow link). The client must come out of every one of
them with retries, never with a corrupt or missing object; the proxy counts what it
did so that a test can prove the faults really happened (a fault test that injects
nothing passes vacuously).

Python 3.11 standard library only. It is not a SwiftPM target: the Swift harness
(Tests/IngestIntegrationTests/FaultProxy.swift) starts it with python3.

Usage
-----
    fault_proxy.py --upstream 127.0.0.1:8333 [--port 0] [--admin-port 0]
                   [--rule RULE]... [--seed N] [--date-shift SECONDS] [--verbose]

The first line on stdout (flushed at once) names both ports:

    listening 127.0.0.1:PORT admin 127.0.0.1:ADMIN_PORT

SIGTERM or SIGINT stops it cleanly (exit status 0), whatever is in flight.

Rules
-----
    ACTION:METHODS:PATTERN[:OPTION=VALUE]...

ACTION     what to do to a request the rule picks (see Actions).
METHODS    an HTTP method, several joined with ',' (PUT,POST), or '*' for any.
PATTERN    what the request target (path and query, as sent) must contain: a plain
           substring ('partNumber=', '?uploads'), a Python regular expression after a
           '~' ('~partNumber=2(&|$)'), or '*' (or nothing) for any target. A pattern
           may itself contain ':'; the options are the trailing fields that read
           'name=value' with a name from the list below.
OPTIONS    every=N    pick every Nth matching request: the Nth, 2Nth, ... (default 1)
           after=K    let the first K matching requests through before counting
           count=C    pick at most C requests, then let everything through
                      (default: no limit)
           chance=P   pick a counted request with probability P, from a generator
                      seeded with --seed and the rule's position: the same requests
                      in the same order get the same faults (default 1)
           seconds=S  stall: how long to hold the request without answering
                      (default 30; ends early when the client hangs up);
                      delay: how long to hold it before forwarding it
           fraction=F reset, truncate: the share of the body forwarded before the
                      connection is cut (default 0.5)
           bytes=N    reset, truncate: forward N bytes of the body instead of a
                      fraction (the only way to cut a chunked body part-way)

Rules are tried in order. Every rule that matches a request (method and pattern)
counts it; the first one whose schedule picks it applies its fault, and the rules
after it do not see that request. A request no rule picks is forwarded untouched.
A retry is a new request: 'reset:PUT:partNumber=:count=2' breaks the first two part
uploads, whichever parts and attempts those are. So is libcurl's own resend: when a
reused keep-alive connection dies before any answer, libcurl sends the request again,
once, on a fresh connection, before its caller sees an error.

Actions
-------
reset      Forward the request head and part of its body (fraction or bytes) to the
           server, then abort both connections with an RST (SO_LINGER 0): the client
           sees ECONNRESET while sending, the server sees a body that stops short and
           must not keep it. A request without a body is reset right after its head,
           without reaching the server.
stall      Read the whole request (not forwarded), then send nothing back for
           `seconds`, or until the client gives up and closes; then close. A client
           needs a timeout to get out of it.
slowdown   Answer 503 with S3's SlowDown error document, without forwarding. The
           body is read and discarded first, so the connection stays usable and the
           client reads the answer instead of a broken pipe; a request that waits for
           '100 Continue' gets the answer at once, with 'Connection: close' (curl then
           stops sending and opens a new connection).
error500   The same with 500 InternalError.
delay      Hold the request for `seconds`, then forward it untouched: a slow link or
           a slow server, without a single error (its body waits in the socket).
truncate   Forward the request and cut the server's answer: the head and part of the
           body (fraction or bytes) reach the client, then an RST. An answer without
           a body is cut inside its head. The server did the work; the client never
           learns the result and must send again.
unconditional
           Forward the request; an answer 412 PreconditionFailed is replaced by
           200 OK with the ETag of the body sent (its MD5): a server that ignores
           If-None-Match, as far as the client can tell (the server kept what it had;
           the client cannot know, as with a server that wrote over the key). Only the
           412s replaced count as injected.

Examples:
    reset:PUT:partNumber=:every=3:count=2     every third part upload, twice
    stall:PUT:~partNumber=2(&|$):count=1:seconds=20
    slowdown:POST:?uploads:count=2            CreateMultipartUpload, twice
    slowdown:*:*                              everything, for ever
    delay:PUT:partNumber=:seconds=0.5         every part upload, half a second late
    unconditional:PUT,POST:*                  a server that ignores If-None-Match

A skewed server clock
---------------------
--date-shift SECONDS moves the `Date` header of every answer the client gets (the
server's, relayed, and the proxy's own error answers) by SECONDS (negative: back), as a
server whose clock is that far off would send it. Nothing else changes: the server still
checks signatures against its true clock, so requests succeed and only what the client
learns of the server's time is off.

Admin endpoint (127.0.0.1:ADMIN_PORT)
-------------------------------------
GET    /stats   JSON: connections, requests, forwarded, injected (by action),
                bytes_to_upstream, bytes_to_client, upstream_failures,
                upstream_seconds (from the first byte sent to the server to the
                last: bytes_to_upstream over it is the rate the server saw),
                acknowledged_puts (PUTs answered 2xx), resent_acknowledged and
                resent_acknowledged_bytes (PUTs, and their body bytes, of an object or
                part -- path, partNumber and the body's checksum headers, whatever the
                uploadId -- that the server had acknowledged before: bytes sent again
                that were not in flight),
                stall_hangups (stalls the client gave up on before they ended: its
                timeout fired), per-rule 'matched' and 'fired', and the last 1000
                injections ('events').
DELETE /stats   zero the counters (rules keep theirs).
GET    /rules   the rules, with their counters.
PUT    /rules   replace the rules: a JSON array of rule strings, or
                {"rules": [...]}; their counters start at zero. 400 names a bad rule.

Overhead
--------
A request no rule picks costs one parse of its head and of the answer's head; bodies
are streamed through a fixed 256 KiB buffer per connection, never held whole, with
TCP_NODELAY on both sides so that a head written apart from its body does not wait
for a delayed ACK.
"""

from __future__ import annotations

import argparse
import email.utils
import hashlib
import json
import os
import random
import re
import select
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUFFER_SIZE = 256 * 1024
MAX_HEAD = 64 * 1024
ACTIONS = ("reset", "stall", "slowdown", "error500", "truncate", "delay", "unconditional")
OPTIONS = ("every", "after", "count", "chance", "seconds", "fraction", "bytes")
OPTION_FIELD = re.compile(r"^(%s)=(.+)$" % "|".join(OPTIONS))

shutting_down = threading.Event()
verbose = False
date_shift = 0.0  # seconds added to every Date header the client gets (--date-shift)


def log(message: str) -> None:
    if verbose:
        now = time.time()
        stamp = time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
        print(f"fault_proxy {stamp} {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Rules


class RuleError(ValueError):
    pass


@dataclass
class Rule:
    """One parsed rule and its counters (guarded by the Rules lock)."""

    text: str
    action: str
    methods: frozenset[str] | None  # None: any
    pattern: str | re.Pattern[str] | None  # None: any
    every: int = 1
    after: int = 0
    count: int | None = None
    chance: float = 1.0
    seconds: float = 30.0
    fraction: float = 0.5
    bytes: int | None = None
    matched: int = 0
    fired: int = 0
    rng: random.Random = field(default_factory=random.Random)

    @staticmethod
    def parse(text: str, position: int, seed: int) -> "Rule":
        fields = text.split(":")
        if len(fields) < 2:
            raise RuleError(f"rule {text!r}: write ACTION:METHODS:PATTERN[:OPTION=VALUE]...")
        action, methods = fields[0].strip().lower(), fields[1].strip()
        if action not in ACTIONS:
            raise RuleError(f"rule {text!r}: unknown action {action!r} (one of {', '.join(ACTIONS)})")
        rest = fields[2:]
        options: dict[str, str] = {}
        while rest and OPTION_FIELD.match(rest[-1]):
            name, value = OPTION_FIELD.match(rest.pop()).groups()
            if name in options:
                raise RuleError(f"rule {text!r}: option {name} given twice")
            options[name] = value
        pattern_text = ":".join(rest)
        pattern: str | re.Pattern[str] | None
        if pattern_text in ("", "*"):
            pattern = None
        elif pattern_text.startswith("~"):
            try:
                pattern = re.compile(pattern_text[1:])
            except re.error as error:
                raise RuleError(f"rule {text!r}: bad regular expression: {error}") from None
        else:
            pattern = pattern_text
        rule = Rule(
            text=text,
            action=action,
            methods=None if methods in ("", "*") else frozenset(m.strip().upper() for m in methods.split(",")),
            pattern=pattern,
        )
        try:
            if "every" in options:
                rule.every = int(options["every"])
            if "after" in options:
                rule.after = int(options["after"])
            if "count" in options:
                rule.count = int(options["count"])
            if "chance" in options:
                rule.chance = float(options["chance"])
            if "seconds" in options:
                rule.seconds = float(options["seconds"])
            if "fraction" in options:
                rule.fraction = float(options["fraction"])
            if "bytes" in options:
                rule.bytes = int(options["bytes"])
        except ValueError as error:
            raise RuleError(f"rule {text!r}: {error}") from None
        if rule.every < 1 or rule.after < 0 or (rule.count is not None and rule.count < 0):
            raise RuleError(f"rule {text!r}: every must be at least 1, after and count at least 0")
        if not 0 <= rule.chance <= 1 or not 0 <= rule.fraction <= 1 or rule.seconds < 0:
            raise RuleError(f"rule {text!r}: chance and fraction lie in [0, 1], seconds is not negative")
        if rule.bytes is not None and rule.bytes < 0:
            raise RuleError(f"rule {text!r}: bytes is not negative")
        rule.rng = random.Random(f"{seed}/{position}")
        return rule

    def matches(self, method: str, target: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        if self.pattern is None:
            return True
        if isinstance(self.pattern, str):
            return self.pattern in target
        return self.pattern.search(target) is not None

    def picks(self) -> bool:
        """Counts one matching request; says whether this one gets the fault."""
        self.matched += 1
        counted = self.matched - self.after
        if counted <= 0 or counted % self.every != 0:
            return False
        if self.count is not None and self.fired >= self.count:
            return False
        if self.chance < 1 and self.rng.random() >= self.chance:
            return False
        self.fired += 1
        return True

    def cut(self, length: int | None) -> int:
        """How many body bytes to let through before cutting a body of `length`."""
        if self.bytes is not None:
            return self.bytes if length is None else min(self.bytes, length)
        if length is None:
            return 0
        return int(length * self.fraction)

    def summary(self) -> dict:
        return {"rule": self.text, "action": self.action, "matched": self.matched, "fired": self.fired}


class Rules:
    """The rules in force, replaceable at runtime, and the traffic counters."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.lock = threading.Lock()
        self.rules: list[Rule] = []
        self.reset_stats()

    def reset_stats(self) -> None:
        with self.lock:
            self.connections = 0
            self.requests = 0
            self.forwarded = 0
            self.upstream_failures = 0
            self.stall_hangups = 0
            self.bytes_to_upstream = 0
            self.bytes_to_client = 0
            # time.monotonic() of the first and last bytes sent to the server.
            self.upstream_first: float | None = None
            self.upstream_last: float | None = None
            self.injected = {action: 0 for action in ACTIONS}
            self.events: list[dict] = []
            # PUT bodies the server acknowledged (2xx), by object path and part number
            # (the upload id left out: a part sent again to a new upload is sent again).
            self.acknowledged: set[str] = set()
            self.acknowledged_puts = 0
            self.resent_acknowledged = 0
            self.resent_acknowledged_bytes = 0

    def replace(self, texts: list[str]) -> None:
        rules = [Rule.parse(text, position, self.seed) for position, text in enumerate(texts)]
        with self.lock:
            self.rules = rules

    def choose(self, method: str, target: str) -> Rule | None:
        """The rule that picks this request, if any; counts the request either way."""
        with self.lock:
            self.requests += 1
            for index, rule in enumerate(self.rules):
                if rule.matches(method, target) and rule.picks():
                    if rule.action != "unconditional":  # counted only when it changes an answer
                        self.injected_locked(rule, index, method, target)
                    return rule
            return None

    def injected_now(self, rule: "Rule", method: str, target: str) -> None:
        with self.lock:
            self.injected_locked(rule, self.rules.index(rule) if rule in self.rules else -1, method, target)

    def injected_locked(self, rule: "Rule", index: int, method: str, target: str) -> None:
        self.injected[rule.action] += 1
        self.events.append({"action": rule.action, "rule": index, "method": method, "target": target})
        del self.events[:-1000]
        log(f"{rule.action} {method} {target} (rule {index}: {rule.text})")

    def count(self, name: str, amount: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + amount)

    def sent_upstream(self, amount: int) -> None:
        with self.lock:
            now = time.monotonic()
            self.bytes_to_upstream += amount
            self.upstream_first = now if self.upstream_first is None else self.upstream_first
            self.upstream_last = now

    def acknowledge(self, request: "Request", status: int) -> None:
        """Counts a PUT the server answered with 2xx; one it had acknowledged before (the same
        path and part number) is a re-send of bytes that were not in flight."""
        if request.method != "PUT" or not 200 <= status < 300:
            return
        path, _, query = request.target.partition("?")
        part = [field for field in query.split("&") if field.startswith("partNumber=")]
        # The body's own checksums, when the client sends them: other bytes to the same
        # place are an overwrite, not a re-send.
        digests = sorted(f"{key}={value}" for key, value in request.headers
                         if key.startswith("x-amz-checksum-") or key in ("content-md5", "x-amz-meta-xxh128"))
        ident = " ".join([path + ("?" + part[0] if part else ""), *digests])
        with self.lock:
            self.acknowledged_puts += 1
            if ident in self.acknowledged:
                self.resent_acknowledged += 1
                self.resent_acknowledged_bytes += request.content_length or 0
            else:
                self.acknowledged.add(ident)

    def stats(self) -> dict:
        with self.lock:
            return {
                "connections": self.connections,
                "requests": self.requests,
                "forwarded": self.forwarded,
                "upstream_failures": self.upstream_failures,
                "stall_hangups": self.stall_hangups,
                "bytes_to_upstream": self.bytes_to_upstream,
                "upstream_seconds": (self.upstream_last or 0) - (self.upstream_first or 0),
                "bytes_to_client": self.bytes_to_client,
                "injected": dict(self.injected),
                "acknowledged_puts": self.acknowledged_puts,
                "resent_acknowledged": self.resent_acknowledged,
                "resent_acknowledged_bytes": self.resent_acknowledged_bytes,
                "rules": [rule.summary() for rule in self.rules],
                "events": list(self.events),
            }

    def listing(self) -> list[dict]:
        with self.lock:
            return [rule.summary() for rule in self.rules]


# ---------------------------------------------------------------------------
# HTTP/1.1 framing


class Closed(Exception):
    """The peer closed (or reset) the connection where a message was expected."""


class Malformed(Exception):
    """Bytes that are not HTTP/1.1 as this proxy understands it."""


class Connection:
    """A socket with a read buffer: heads are parsed from it, bodies streamed through it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()
        self.chunk = bytearray(BUFFER_SIZE)
        self.view = memoryview(self.chunk)

    def fill(self) -> int:
        """Reads what the socket has (at most one buffer) into the read buffer."""
        count = self.sock.recv_into(self.chunk)
        self.buffer += self.view[:count]
        return count

    def read_head(self) -> bytes | None:
        """The bytes of a message head, through its blank line; None on a clean EOF
        before the first byte."""
        start = 0
        while True:
            end = self.buffer.find(b"\r\n\r\n", max(0, start - 3))
            if end >= 0:
                head = bytes(self.buffer[: end + 4])
                del self.buffer[: end + 4]
                return head
            if len(self.buffer) > MAX_HEAD:
                raise Malformed("message head larger than 64 KiB")
            start = len(self.buffer)
            if self.fill() == 0:
                if not self.buffer:
                    return None
                raise Closed("connection closed inside a message head")

    def read_line(self) -> bytes:
        while True:
            end = self.buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buffer[: end + 2])
                del self.buffer[: end + 2]
                return line
            if len(self.buffer) > MAX_HEAD:
                raise Malformed("line longer than 64 KiB")
            if self.fill() == 0:
                raise Closed("connection closed inside a chunked body")

    def read_some(self, limit: int) -> memoryview | bytes:
        """Up to `limit` bytes: what is buffered, or one read from the socket. The
        memoryview it may return is valid until the next read."""
        if self.buffer:
            count = min(limit, len(self.buffer))
            data = bytes(self.buffer[:count])
            del self.buffer[:count]
            return data
        count = self.sock.recv_into(self.chunk, min(limit, BUFFER_SIZE))
        if count == 0:
            raise Closed("connection closed inside a body")
        return self.view[:count]

    def send(self, data: bytes | memoryview) -> None:
        self.sock.sendall(data)

    def has_pending_input(self) -> bool:
        return bool(self.buffer) or bool(readable([self.sock], 0))

    def abort(self) -> None:
        """Closes with an RST instead of a FIN."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass
class Head:
    raw: bytes
    start: list[str]  # request: method, target, version; response: version, status, reason
    headers: list[tuple[str, str]]

    @classmethod
    def parse(cls, raw: bytes):
        lines = raw[:-4].decode("latin-1").split("\r\n")
        start = lines[0].split(" ", 2)
        if len(start) < 2:
            raise Malformed(f"bad start line {lines[0]!r}")
        headers = []
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise Malformed(f"bad header line {line!r}")
            headers.append((name.strip().lower(), value.strip()))
        return cls(raw, start, headers)

    def get(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def tokens(self, name: str) -> set[str]:
        return {
            token.strip().lower() for key, value in self.headers if key == name for token in value.split(",")
        }

    @property
    def chunked(self) -> bool:
        return "chunked" in self.tokens("transfer-encoding")

    @property
    def content_length(self) -> int | None:
        value = self.get("content-length")
        if value is None:
            return None
        try:
            length = int(value)
        except ValueError:
            raise Malformed(f"bad Content-Length {value!r}") from None
        if length < 0:
            raise Malformed(f"bad Content-Length {value!r}")
        return length

    @property
    def version(self) -> str:
        raise NotImplementedError

    def keeps_alive(self) -> bool:
        connection = self.tokens("connection")
        if "close" in connection:
            return False
        return self.version != "HTTP/1.0" or "keep-alive" in connection


class Request(Head):
    @property
    def version(self) -> str:
        return self.start[2] if len(self.start) > 2 else "HTTP/0.9"

    @property
    def method(self) -> str:
        return self.start[0].upper()

    @property
    def target(self) -> str:
        return self.start[1]

    @property
    def has_body(self) -> bool:
        return self.chunked or (self.content_length or 0) > 0

    @property
    def expects_continue(self) -> bool:
        return (self.get("expect") or "").lower() == "100-continue" and self.has_body


class Response(Head):
    @property
    def version(self) -> str:
        return self.start[0]

    @property
    def status(self) -> int:
        try:
            return int(self.start[1])
        except ValueError:
            raise Malformed(f"bad status line {' '.join(self.start)!r}") from None


def body_kind(request_method: str, response: Response) -> str:
    """How a response's body is framed: 'none', 'length', 'chunked' or 'close'."""
    if request_method == "HEAD" or response.status in (204, 304) or 100 <= response.status < 200:
        return "none"
    if response.chunked:
        return "chunked"
    if response.content_length is not None:
        return "length" if response.content_length > 0 else "none"
    return "close"


class Body:
    """Streams one message body from a connection, by its framing, in bounded pieces."""

    @staticmethod
    def copy_length(source: Connection, length: int, sink, limit: int | None = None) -> int:
        """Copies `length` bytes (or the first `limit` of them) to `sink`; returns how many."""
        remaining = length if limit is None else min(length, limit)
        copied = 0
        while remaining > 0:
            data = source.read_some(remaining)
            sink(data)
            copied += len(data)
            remaining -= len(data)
        return copied

    @staticmethod
    def copy_chunked(source: Connection, sink, limit: int | None = None) -> int:
        """Copies a chunked body verbatim (sizes, data, trailers); with `limit`, stops
        once that many bytes of chunk data went through. Returns the data bytes copied."""
        copied = 0
        while True:
            line = source.read_line()
            sink(line)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise Malformed(f"bad chunk size line {line!r}") from None
            if size == 0:
                while True:  # trailers, up to the blank line
                    trailer = source.read_line()
                    sink(trailer)
                    if trailer == b"\r\n":
                        return copied
            if limit is not None and copied + size > limit:
                return copied + Body.copy_length(source, size, sink, limit - copied)
            copied += Body.copy_length(source, size, sink)
            line = source.read_line()  # the CRLF after the chunk's data
            sink(line)

    @staticmethod
    def copy(source: Connection, head: Head, kind: str, sink, limit: int | None = None) -> int:
        if kind == "length":
            return Body.copy_length(source, head.content_length or 0, sink, limit)
        if kind == "chunked":
            return Body.copy_chunked(source, sink, limit)
        if kind == "close":
            copied = 0
            while limit is None or copied < limit:
                try:
                    data = source.read_some(BUFFER_SIZE if limit is None else limit - copied)
                except Closed:
                    break
                sink(data)
                copied += len(data)
            return copied
        return 0


def request_body_kind(request: Request) -> str:
    if request.chunked:
        return "chunked"
    return "length" if (request.content_length or 0) > 0 else "none"


def discard(_: bytes | memoryview) -> None:
    pass


def readable(sockets: list[socket.socket], timeout: float) -> list[socket.socket]:
    """The sockets among `sockets` with input (or EOF) waiting, after at most `timeout`
    seconds. poll rather than select: no limit on descriptor numbers."""
    poller = select.poll()
    for sock in sockets:
        poller.register(sock, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(timeout * 1000)}
    return [sock for sock in sockets if sock.fileno() in ready]


# ---------------------------------------------------------------------------
# The proxy


def http_date(seconds: float) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(seconds))


def shifted_date(head: bytes) -> bytes:
    """A response head with its Date header moved by --date-shift (unchanged without one)."""
    if not date_shift:
        return head
    lines = head.split(b"\r\n")
    for index, line in enumerate(lines):
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == b"date":
            try:
                server = email.utils.parsedate_to_datetime(value.strip().decode("latin-1")).timestamp()
            except (TypeError, ValueError):
                return head
            lines[index] = b"Date: " + http_date(server + date_shift).encode()
    return b"\r\n".join(lines)


def s3_error(status: int, reason: str, code: str, message: str, request: Request, close: bool) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{request.target.split('?', 1)[0]}</Resource>"
        f"<RequestId>fault-proxy-{time.monotonic_ns()}</RequestId></Error>"
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        f"Date: {http_date(time.time() + date_shift)}\r\n"
        "Content-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n"
        + ("Connection: close\r\n" if close else "")
        + "Server: fault-proxy\r\n\r\n"
    ).encode()
    return head + body


class Session:
    """One client connection, its requests handled one at a time, and the upstream
    connection that serves them (opened on demand, reopened when the server closes it)."""

    def __init__(self, client: socket.socket, upstream: tuple[str, int], rules: Rules) -> None:
        self.client = Connection(client)
        self.upstream_address = upstream
        self.upstream: Connection | None = None
        self.rules = rules

    def run(self) -> None:
        try:
            while not shutting_down.is_set():
                raw = self.client.read_head()
                if raw is None:
                    return
                request = Request.parse(raw)
                rule = self.rules.choose(request.method, request.target)
                keep_going = self.inject(rule, request) if rule else self.forward(request)
                if not keep_going or not request.keeps_alive():
                    return
        except (Closed, Malformed, OSError) as error:
            log(f"connection ended: {error!r}")
        finally:
            self.client.close()
            if self.upstream:
                self.upstream.close()

    # -- forwarding

    def connect_upstream(self) -> Connection:
        """The upstream connection, fresh if the last one was closed or is closing (an
        idle keep-alive connection that is readable has been closed by the server)."""
        if self.upstream is not None and self.upstream.has_pending_input():
            self.upstream.close()
            self.upstream = None
        if self.upstream is None:
            try:
                self.upstream = Connection(socket.create_connection(self.upstream_address, timeout=10))
                self.upstream.sock.settimeout(None)
            except OSError:
                self.rules.count("upstream_failures")
                raise
        return self.upstream

    def to_upstream(self, data: bytes | memoryview) -> None:
        self.upstream.send(data)
        self.rules.sent_upstream(len(data))

    def to_client(self, data: bytes | memoryview) -> None:
        self.client.send(data)
        self.rules.count("bytes_to_client", len(data))

    def forward(self, request: Request, unconditional: "Rule | None" = None) -> bool:
        """Relays one request and its answer. Returns whether the client connection can
        carry another request. `unconditional`: a 412 answer becomes 200 (that action)."""
        upstream = self.connect_upstream()
        self.to_upstream(request.raw)
        kind = request_body_kind(request)
        body_md5 = hashlib.md5()

        def to_upstream(data: bytes | memoryview) -> None:
            body_md5.update(data)
            self.to_upstream(data)
        if request.expects_continue:
            # The client waits for "100 Continue" (curl for up to a second, then sends
            # anyway). Relay whichever comes first: the server's interim or final answer,
            # or the client's body.
            ready = readable([upstream.sock, self.client.sock], 30)
            if upstream.sock in ready or upstream.buffer:
                response = self.relay_response_head(request, interim_ends=True, hold_412=unconditional is not None)
                if response.status == 412 and unconditional is not None:
                    # Refused before the body: take the body as a server that writes would.
                    self.upstream.close()
                    self.upstream = None
                    self.to_client(b"HTTP/1.1 100 Continue\r\n\r\n")
                    Body.copy(self.client, request, kind, body_md5.update)
                    self.answer_written(unconditional, request, body_md5.hexdigest())
                    return request.keeps_alive()
                if response.status >= 200:
                    # A final answer before the body: the client will not send it, and
                    # neither connection can be trusted to be in step any more.
                    self.relay_response_body(request, response)
                    self.rules.count("forwarded")
                    return False
        try:
            Body.copy(self.client, request, kind, to_upstream)
        except OSError:
            # The server stopped reading (it answered early and closed): relay its answer
            # if there is one, then end the connection.
            self.rules.count("upstream_failures")
            try:
                response = self.relay_response_head(request)
                self.relay_response_body(request, response)
            except (Closed, Malformed, OSError):
                pass
            return False
        response = self.relay_response_head(request, hold_412=unconditional is not None)
        if response.status == 412 and unconditional is not None:
            Body.copy(self.upstream, response, body_kind(request.method, response), discard)
            if not response.keeps_alive():
                self.upstream.close()
                self.upstream = None
            self.answer_written(unconditional, request, body_md5.hexdigest())
            return True
        keep_alive = self.relay_response_body(request, response)
        self.rules.count("forwarded")
        self.rules.acknowledge(request, response.status)
        return keep_alive

    def answer_written(self, rule: "Rule", request: Request, md5: str) -> None:
        """What a server that ignores If-None-Match answers a PUT: 200, with the body's ETag."""
        self.rules.injected_now(rule, request.method, request.target)
        self.to_client(f'HTTP/1.1 200 OK\r\nETag: "{md5}"\r\nContent-Length: 0\r\n'
                       f"Date: {http_date(time.time() + date_shift)}\r\n\r\n".encode())

    def relay_response_head(self, request: Request, interim_ends: bool = False, hold_412: bool = False) -> Response:
        """Reads the server's answer head and sends it to the client. Interim (1xx)
        answers are relayed on the way to the final one, or, with `interim_ends` (while
        the client waits for "100 Continue"), the first one ends the wait. With `hold_412`,
        a 412 answer is read but not sent."""
        while True:
            raw = self.upstream.read_head()
            if raw is None:
                raise Closed("the server closed the connection without answering")
            response = Response.parse(raw)
            if hold_412 and response.status == 412:
                return response
            self.to_client(shifted_date(raw))
            if response.status >= 200 or response.status == 101 or interim_ends:
                return response

    def relay_response_body(self, request: Request, response: Response) -> bool:
        kind = body_kind(request.method, response)
        Body.copy(self.upstream, response, kind, self.to_client)
        if kind == "close" or not response.keeps_alive():
            self.upstream.close()
            self.upstream = None
            return False
        return True

    # -- faults

    def inject(self, rule: Rule, request: Request) -> bool:
        """Applies `rule` to `request`. Returns whether the client connection lives on."""
        if rule.action == "reset":
            self.reset(rule, request)
            return False
        if rule.action == "stall":
            self.stall(rule, request)
            return False
        if rule.action == "truncate":
            self.truncate(rule, request)
            return False
        if rule.action == "delay":
            shutting_down.wait(rule.seconds)
            return self.forward(request)
        if rule.action == "unconditional":
            return self.forward(request, unconditional=rule)
        status, reason, code, message = {
            "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
            "error500": (
                500, "Internal Server Error", "InternalError",
                "We encountered an internal error. Please try again.",
            ),
        }[rule.action]
        if request.expects_continue:
            # Answer before the body: curl stops sending and will not reuse the
            # connection; close it once the client has had the answer.
            self.to_client(s3_error(status, reason, code, message, request, close=True))
            self.linger_close()
            return False
        Body.copy(self.client, request, request_body_kind(request), discard)
        self.to_client(s3_error(status, reason, code, message, request, close=not request.keeps_alive()))
        return True

    def reset(self, rule: Rule, request: Request) -> None:
        if request.has_body:
            self.connect_upstream()
            self.to_upstream(request.raw)
            if request.expects_continue:
                self.to_client(b"HTTP/1.1 100 Continue\r\n\r\n")
            kind = request_body_kind(request)
            Body.copy(self.client, request, kind, self.to_upstream, rule.cut(request.content_length))
            self.upstream.abort()
            self.upstream = None
        self.client.abort()

    def stall(self, rule: Rule, request: Request) -> None:
        started = time.monotonic()
        deadline = started + rule.seconds
        if request.expects_continue:
            self.to_client(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.client.sock.settimeout(max(0.01, rule.seconds))
        try:
            Body.copy(self.client, request, request_body_kind(request), discard)
        except (TimeoutError, socket.timeout):
            return
        finally:
            self.client.sock.settimeout(None)
        # Silence until the deadline, unless the client hangs up first (then there is
        # nobody left to stall, and the thread is free again).
        while not shutting_down.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if readable([self.client.sock], min(left, 0.5)):
                try:
                    hung_up = not self.client.sock.recv(BUFFER_SIZE)
                except OSError:
                    hung_up = True
                if hung_up:
                    self.rules.count("stall_hangups")
                    log(f"stall of {request.method} {request.target} ended: the client hung up after "
                        f"{time.monotonic() - started:.1f} s")
                    return

    def truncate(self, rule: Rule, request: Request) -> None:
        upstream = self.connect_upstream()
        self.to_upstream(request.raw)
        if request.expects_continue:
            self.to_client(b"HTTP/1.1 100 Continue\r\n\r\n")
        Body.copy(self.client, request, request_body_kind(request), self.to_upstream)
        while True:
            raw = upstream.read_head()
            if raw is None:
                raise Closed("the server closed the connection without answering")
            response = Response.parse(raw)
            if response.status >= 200:
                break
        kind = body_kind(request.method, response)
        raw = shifted_date(raw)
        if kind == "none":
            self.to_client(raw[: rule.cut(len(raw)) if rule.bytes is None else min(rule.bytes, len(raw))])
        else:
            self.to_client(raw)
            length = response.content_length if kind == "length" else None
            Body.copy(upstream, response, kind, self.to_client, rule.cut(length))
        upstream.abort()
        self.upstream = None
        self.client.abort()

    def linger_close(self) -> None:
        """Half-closes, then reads and drops what the client still sends (for at most
        five seconds), so that the answer is not destroyed by an RST for unread data."""
        try:
            self.client.sock.shutdown(socket.SHUT_WR)
            self.client.sock.settimeout(5)
            while self.client.sock.recv(BUFFER_SIZE):
                pass
        except OSError:
            pass


# ---------------------------------------------------------------------------
# Admin endpoint


def admin_server(rules: Rules, port: int) -> ThreadingHTTPServer:
    class Admin(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def answer(self, status: int, document) -> None:
            body = json.dumps(document, indent=1).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/stats":
                self.answer(200, rules.stats())
            elif self.path == "/rules":
                self.answer(200, rules.listing())
            else:
                self.answer(404, {"error": "GET /stats or /rules"})

        def do_DELETE(self) -> None:
            if self.path == "/stats":
                rules.reset_stats()
                self.answer(200, rules.stats())
            else:
                self.answer(404, {"error": "DELETE /stats"})

        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/rules":
                self.answer(404, {"error": "PUT /rules"})
                return
            try:
                document = json.loads(body or b"[]")
                texts = document["rules"] if isinstance(document, dict) else document
                if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
                    raise RuleError("send a JSON array of rule strings, or {\"rules\": [...]}")
                rules.replace(texts)
            except (ValueError, KeyError) as error:
                self.answer(400, {"error": str(error)})
                return
            log(f"rules replaced: {texts}")
            self.answer(200, rules.listing())

        do_POST = do_PUT

    server = ThreadingHTTPServer(("127.0.0.1", port), Admin)
    server.daemon_threads = True
    return server


# ---------------------------------------------------------------------------


def serve(listener: socket.socket, upstream: tuple[str, int], rules: Rules) -> None:
    while not shutting_down.is_set():
        try:
            client, _ = listener.accept()
        except OSError:
            return
        rules.count("connections")
        threading.Thread(target=Session(client, upstream, rules).run, daemon=True).start()


def main() -> int:
    global verbose, date_shift
    parser = argparse.ArgumentParser(
        description="Fault-injecting HTTP/1.1 proxy for tests (rules: see the module docstring).")
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the server to forward to")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    parser.add_argument("--admin-port", type=int, default=0, help="admin port (0: any free one)")
    parser.add_argument("--rule", action="append", default=[], help="ACTION:METHODS:PATTERN[:OPTION=VALUE]...")
    parser.add_argument("--seed", type=int, default=0, help="seed for rules with chance=")
    parser.add_argument("--date-shift", type=float, default=0.0, metavar="SECONDS",
                        help="move the Date header of every answer by SECONDS, as a server with a skewed clock")
    parser.add_argument("--verbose", action="store_true", help="log each fault to stderr")
    arguments = parser.parse_args()
    verbose = arguments.verbose
    date_shift = arguments.date_shift

    host, _, port = arguments.upstream.rpartition(":")
    upstream = (host or "127.0.0.1", int(port))
    rules = Rules(arguments.seed)
    try:
        rules.replace(arguments.rule)
    except RuleError as error:
        parser.error(str(error))

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", arguments.port))
    listener.listen(128)
    admin = admin_server(rules, arguments.admin_port)

    def stop(signum, frame) -> None:
        shutting_down.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=serve, args=(listener, upstream, rules), daemon=True).start()
    threading.Thread(target=admin.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    print(f"listening 127.0.0.1:{listener.getsockname()[1]} admin 127.0.0.1:{admin.server_address[1]}", flush=True)

    while not shutting_down.wait(0.5):
        pass
    listener.close()
    admin.shutdown()
    admin.server_close()
    log(f"stopped: {json.dumps({k: v for k, v in rules.stats().items() if k != 'events'})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
