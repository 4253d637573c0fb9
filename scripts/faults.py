#!/usr/bin/env python3
"""make faults: the real release binary against a real SeaweedFS on 127.0.0.1, under faults, counted.

Each scenario makes its cards, runs `ingest` (with --json, so that it can be killed from
outside at a chosen event), injects its faults, then reruns / resumes until ingest says it is
done (bounded), and counts by DOWNLOADING every version of every object it left in the bucket
and comparing xxh128sum with the card's files — never by trusting ingest's journal or output.
A power cut, as xfstests makes one, shuts down the ext4 file system that holds the state
directory without flushing its log (F.PowerCutState), then kills ingest: what was not synced is
gone when it is mounted again.

Counted per scenario (summed over its repetitions):
  runs       ingest invocations          faults    faults injected (kills, proxy faults, …)
  expected   files on the card(s)        verified  expected files whose bytes are a current object
  lost       expected files whose bytes are no current object (after the reruns)
  replaced   keys whose versions hold different bytes (the bucket is versioned)
  duplicate  current objects beyond the card files holding their bytes (each file its own object)
  corrupt    object versions whose bytes are no card file's, or differ from their x-amz-meta-xxh128
  open       multipart uploads left open (ListMultipartUploads)
  re-sent    body bytes of PUTs (objects, parts) the server had already acknowledged, sent again:
             bytes re-sent beyond the parts in flight (the fault proxy counts them)
  extra      all bytes the proxy forwarded beyond one copy of each distinct content
             (re-sent + parts in flight when a fault hit + requests' heads)
  MHL        generations of the cards' ASC MHL histories in the bucket that passed every check
Every card file has an object of its own (a content already in the bucket is copied by the
server): a duplicate is a current object beyond the card files holding its bytes. A card's
ASC MHL history (<card folder>ascmhl/: NNNN_….mhl, ascmhl_chain.xml) is checked apart, once
every file of the repetition landed (F.check_history): no manifest replaced, the chain only
ever extended, its generations 1..N with their C4 ids, every object of the folder listed once
with its xxh128, and the downloaded folder passes `ascmhl diff` and `ascmhl create -h xxh128`;
with the default key template every card folder must hold one.
The tus rows ("tus: …") send to a tus 1.0 server instead (scripts/tus_server.py, started by the
first of them, behind a fault proxy of its own) and count by its stored uploads and their .info
(F.audit_tus), bounding the bytes sent after each fault by what the server lacked at it.
The fleet rows ("fleet …") run stations A, B and C (state directories, [device] ids of their own,
the fleet key template) against a SeaweedFS cluster of two gateways (F.Cluster, started by the
first of them), each gateway behind a counting proxy: handover of a killed station's upload,
clones of a card at once, a gateway and a volume server killed, two stations adopting at once.
Hostile cards (a file system off the allow-list, the station disk's UUID, dates of 1901 to 2300,
a 16 TiB sparse file, links and mounts inside the card, escape sequences in names) are checked for
their documented outcome, and every byte of the host they could reach is looked for in the bucket.
Exit status 1 when any scenario loses, replaces, duplicates, corrupts or leaves open anything, lets
a host file into the bucket, or a bad input does not get its documented exit status and message,
or a card's history does not verify, or ingest says a card is safe to erase when the bucket does
not back it; 2 when the harness fails.

  faults.py [--short] [--only REGEX] [--reps N] [--markdown FILE] [--keep] [--list]
  env: INGEST (binary, default .build/release/ingest), VENV (default .venv), FAULTS_WORK (/var/tmp)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid

import botocore.config
import botocore.session
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib as F  # noqa: E402

MiB = 1048576
PART_SIZE = 5 * MiB  # [upload] part_size of every repetition's configuration
CARD_MTIME = 1780315200.0  # 2026-06-01 12:00 UTC: one {date} for every card, so paths collide as on real cards
BUCKET = "faults"


# ---------------------------------------------------------------------------
# A scenario's bookkeeping


@dataclass
class Row:
    name: str
    runs: int = 0
    faults: int = 0
    expected: int = 0
    verified: int = 0
    lost: int = 0
    replaced: int = 0
    duplicates: int = 0
    corrupt: int = 0
    open_uploads: int = 0
    resent: int = 0  # acknowledged parts/objects sent again (the proxy's count)
    generations: int = 0  # ASC MHL generations in the bucket that verified (chain, C4 ids, listing, ascmhl)
    extra: int = 0  # everything sent beyond one copy of each distinct content
    sent: int = 0
    checks_failed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.replaced or self.duplicates or self.corrupt or self.open_uploads
                    or self.checks_failed or self.error)

    def add(self, count: F.Count) -> None:
        self.expected += count.expected
        self.verified += count.verified
        self.lost += count.lost
        self.replaced += count.replaced
        self.duplicates += count.duplicates
        self.corrupt += count.corrupt
        self.open_uploads += count.open_uploads
        self.extra += count.resent_bytes
        self.sent += count.sent_bytes
        self.notes += count.notes
        self.generations += count.generations
        self.checks_failed += count.history_problems


class Harness:
    def __init__(self, args) -> None:
        self.args = args
        self.repo = F.REPO
        self.binary = os.environ.get("INGEST") or os.path.join(self.repo, ".build", "release", "ingest")
        self.venv = os.environ.get("VENV") or os.path.join(self.repo, ".venv")
        self.ascmhl = os.path.join(self.venv, "bin", "ascmhl")  # the ASC's reference tool (ascmhl 1.2)
        base = os.environ.get("FAULTS_WORK") or "/var/tmp"
        self.work = tempfile.mkdtemp(dir=base, prefix="ingest-faults.")
        self.admin = ("faults-admin-" + secrets.token_hex(4), secrets.token_hex(20))
        self.seed = args.seed
        self.counter = 0
        self.rows: list[Row] = []
        self.weed: F.Weed | None = None
        self.rgw: F.RGW | None = None  # instead of weed, with --server rgw
        self.proxy: F.Proxy | None = None
        self.tus_server: F.TusServer | None = None  # started by the first tus row (tus())
        self.other: F.Weed | None = None  # another cluster, started by the first row that needs it
        self.tus_proxy: F.Proxy | None = None

    # -- set-up ---------------------------------------------------------------

    def start(self) -> None:
        F.log(f"work directory {self.work}")
        # The binary under test is the one stations run: it must carry no fault hook
        # (Upload/FaultHooks.swift is compiled into debug builds only), or a variable in its
        # environment could kill it or damage a staged copy.
        with open(self.binary, "rb") as binary:
            if b"INGEST_TEST_STOP_AT" in binary.read():
                raise SystemExit(f"{self.binary} honours fault hooks (a debug build?): build it with `make release`")
        if not os.access(self.ascmhl, os.X_OK):
            raise SystemExit(f"no {self.ascmhl}: the venv lacks ascmhl (make venv installs it)")
        if self.args.server == "rgw":
            self.rgw = F.RGW(self.venv, os.path.join(self.work, "rgw"), *self.admin)
            self.rgw.start(BUCKET)
            self.client = self.rgw.client()
            server, server_port = f"Ceph RGW ({self.rgw.endpoint})", self.rgw.s3_port
        else:
            self.weed = F.Weed(self.venv, os.path.join(self.work, "weed"), *self.admin)
            self.weed.start()
            self.weed.wait()
            self.client = self.weed.client()
            self.client.create_bucket(Bucket=BUCKET)
            server, server_port = f"SeaweedFS (pid {self.weed.process.pid})", self.weed.s3_port
        self.client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        status = self.client.get_bucket_versioning(Bucket=BUCKET).get("Status")
        self.versioned = status == "Enabled"
        if not self.versioned:
            F.log("bucket versioning is not available: 'replaced' can only be seen as a lost file")
        self.proxy = F.Proxy(self.venv, server_port, self.seed, os.path.join(self.work, "proxy.log"))
        F.log(f"{server} on 127.0.0.1:{server_port}, fault proxy on {self.proxy.endpoint}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INGEST_"))}
        home = os.path.join(self.work, "home")
        os.makedirs(home, exist_ok=True)
        env.update({
            "HOME": home, "AWS_ACCESS_KEY_ID": self.admin[0], "AWS_SECRET_ACCESS_KEY": self.admin[1],
            "AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true", "LC_ALL": "C.UTF-8",
        })
        self.ingest = F.Ingest(self.binary, env)

    def other_cluster(self) -> F.Weed:
        """Another SeaweedFS with a bucket of the same name and the same credentials: another
        cluster a station could be pointed at by mistake. Started by the first row that needs
        it, stopped by its PID at the end."""
        if self.other is None:
            self.other = F.Weed(self.venv, os.path.join(self.work, "weed-other"), *self.admin)
            self.other.start()
            self.other.wait()
            self.other.client().create_bucket(Bucket=BUCKET)
            F.log(f"another SeaweedFS (pid {self.other.process.pid}) on {self.other.endpoint}")
        return self.other

    def tus(self) -> tuple[F.TusServer, F.Proxy]:
        """The tus server and a fault proxy of its own in front of it, started by the first tus
        row (the S3 rows never need them); stopped by their PIDs at the end, whatever happens."""
        if self.tus_server is None:
            self.tus_server = F.TusServer(self.venv, os.path.join(self.work, "tus", "files"))
            self.tus_proxy = F.Proxy(self.venv, self.tus_server.port, self.seed, os.path.join(self.work, "tus-proxy.log"))
            F.log(f"tus server (pid {self.tus_server.process.pid}) on 127.0.0.1:{self.tus_server.port}, "
                  f"its fault proxy on {self.tus_proxy.endpoint}")
        return self.tus_server, self.tus_proxy

    # -- per scenario -----------------------------------------------------------

    def scenario_dir(self, name: str) -> str:
        self.counter += 1
        path = os.path.join(self.work, f"{self.counter:03d}-{re.sub('[^a-z0-9]+', '-', name.lower())[:40]}")
        os.makedirs(path)
        return path


class Context:
    """One repetition of one scenario: its own directory, station id (the keys' first field),
    state directories, configuration and random data; the proxy's counters start at zero."""

    def __init__(self, harness: Harness, row: Row, rep: int, config_extra: str = "") -> None:
        self.h = harness
        self.row = row
        self.dir = harness.scenario_dir(f"{row.name}-{rep}")
        self.rep = rep
        self.device_id = "s" + os.path.basename(self.dir).split("-")[0] + "-" + secrets.token_hex(2)
        self.rng = random.Random(f"{harness.seed}/{row.name}/{rep}")
        self.config = os.path.join(self.dir, "ingest.toml")
        with open(self.config, "w") as out:
            out.write(f"""[device]
id = "{self.device_id}"

[s3]
connect_timeout = "3s"
stall_timeout = "5s"

[upload]
part_size = "{PART_SIZE // MiB}MiB"
single_put_threshold = "5MiB"
adopt_after = "5s"

[staging]
reserve = "1MiB"
{config_extra}""")
        self.files: list[F.CardFile] = []
        self.faults = 0
        self.expect_empty = False
        self.known: list[F.CardFile] = []  # card files that must not be uploaded
        self.forbidden: list[F.CardFile] = []  # the host's files, off the card: never in the bucket
        self.audit_hook = None
        # The cards' ASC MHL histories, checked at the end (F.audit_prefix): "required" (every
        # card folder of a repetition whose files all landed must hold a history that verifies),
        # "if-present" (only the folders that hold one), "off". A key template of the row's own
        # (configure) may spread a card over folders: "if-present" then.
        self.history = "required"
        self.generations: int | None = None  # how many generations each history must have
        self.states: list[str] = []  # the state directories made by state(): asked for their verdicts
        self.tampered: set[str] = set()  # keys the scenario forged, as someone with write access would
        harness.proxy.rules([])
        harness.proxy.reset()

    def state(self, name: str = "state") -> str:
        path = os.path.join(self.dir, name)
        os.makedirs(path, exist_ok=True)
        if path not in self.states:
            self.states.append(path)
        return path

    # -- cards --

    def card(self, name: str, spec: list[tuple[bytes | str, int]], root: str | None = None) -> str:
        """A plain directory card: (relative path, size) pairs of random bytes, one mtime."""
        root = root or os.path.join(self.dir, name)
        os.makedirs(root, exist_ok=True)
        for relative, size in spec:
            F.write_file(root, relative, random_bytes(self.rng, size), CARD_MTIME)
        return root

    def mixed_spec(self, big: bool = True) -> list[tuple[str, int]]:
        """Three multipart files (3 and 4 parts of 5 MiB), small photos, an empty file, a copy."""
        spec: list[tuple[str, int]] = []
        if big:
            spec += [("DCIM/100MEDIA/DJI_0100.MP4", 12 * MiB + 12345), ("DCIM/100MEDIA/DJI_0101.MP4", 16 * MiB + 7),
                     ("DCIM/101MEDIA/DJI_0102.MP4", 11 * MiB)]
        for index in range(8):
            spec.append((f"DCIM/100MEDIA/DJI_{index + 1:04d}.JPG", self.rng.randint(64 * 1024, 1 * MiB)))
        spec.append(("MISC/EMPTY.TXT", 0))
        return spec

    def mixed_card(self, name: str = "card", big: bool = True) -> str:
        root = self.card(name, self.mixed_spec(big))
        shutil.copyfile(os.path.join(root, "DCIM/100MEDIA/DJI_0001.JPG"), os.path.join(root, "MISC/DJI_0001-copy.JPG"))
        os.utime(os.path.join(root, "MISC/DJI_0001-copy.JPG"), (CARD_MTIME, CARD_MTIME))
        return root

    def expect(self, root: str) -> None:
        self.files += F.card_files(root)

    # -- ingest --

    def configure(self, section: str, line: str) -> None:
        """One more setting in this repetition's configuration: `line` under `[section]`."""
        with open(self.config) as file:
            text = file.read()
        with open(self.config, "w") as file:
            file.write(text.replace(f"[{section}]\n", f"[{section}]\n{line}\n", 1))
        if line.startswith("key_template") and self.history == "required":
            self.history = "if-present"

    def run(self, card: str | None, state: str, *, resume: bool = False, timeout: float = 180,
            device: str | None = None, json: bool = True, options: list[str] = (), **kw) -> F.Run:
        """`options`: more command-line options (--max-rate …)."""
        if resume:
            args = ["resume", "--state-dir", state, "--config", self.config]
        elif device:
            args = ["--device", device, "--endpoint", self.h.proxy.endpoint, "--bucket", BUCKET, "--state-dir", state,
                    "--config", self.config]
        else:
            args = [card, "--endpoint", self.h.proxy.endpoint, "--bucket", BUCKET, "--state-dir", state,
                    "--config", self.config]
        return self.command(args + list(options) + (["--json"] if json else []), timeout=timeout, **kw)

    def command(self, args: list[str], timeout: float = 180, **kw) -> F.Run:
        """Any ingest command line, bounded by `timeout`; a crash or a hang is a failed check."""
        run = self.h.ingest.run(args, timeout=timeout, **kw)
        self.row.runs += 1
        if run.killed:
            self.faults += 1
        if run.timed_out:
            self.row.checks_failed.append(f"{' '.join(args[:1])}: no answer within {timeout:.0f} s (killed)")
        if run.status == 70 or "Fatal error" in run.stderr or run.status in (-signal.SIGSEGV, -signal.SIGABRT,
                                                                              -signal.SIGILL, -signal.SIGTRAP):
            self.row.checks_failed.append(f"ingest crashed (status {run.status}): {tail(run.stderr)}")
        return run

    def finish(self, card: str | None, state: str, attempts: int = 5, resume_first: bool = True, **kw) -> F.Run | None:
        """Resume, then ingest the card again, until a run ends with status 0 (bounded)."""
        last = None
        for attempt in range(attempts):
            if resume_first and attempt == 0:
                self.run(None, state, resume=True, **kw)
            last = self.run(card, state, **kw) if card else self.run(None, state, resume=True, **kw)
            if last.status == 0:
                return last
            time.sleep(0.5)
        self.row.notes.append(f"not done after {attempts} reruns: last status {last.status}: {tail(last.stderr)}")
        return last

    def audit(self) -> F.Count:
        count = F.audit_prefix(self.h.client, BUCKET, self.device_id + "/", self.files, self.dir, self.h.versioned,
                               self.known, self.forbidden, history="off" if self.expect_empty else self.history,
                               ascmhl=self.h.ascmhl, generations=self.generations, tampered=self.tampered)
        stats = self.h.proxy.stats()
        count.sent_bytes = stats["bytes_to_upstream"]
        self.row.resent += stats.get("resent_acknowledged_bytes", 0)
        self.faults += sum(stats["injected"].values())
        if self.expect_empty and count.versions:
            self.row.checks_failed.append(f"{count.versions} object(s) uploaded from a card with a bad input")
        if any("no ASC MHL history" in problem for problem in count.history_problems):
            self.verdicts_noted()
        self.row.faults += self.faults
        self.row.add(count)
        return count

    def verdicts_noted(self) -> None:
        """A card with no history: why, in ingest's words (`status --json` of each state
        directory still there), for the notes."""
        for state in self.states:
            if not os.path.exists(os.path.join(state, "journal.sqlite")):
                continue
            run = self.h.ingest.run(["status", "--state-dir", state, "--config", self.config, "--json"], timeout=60)
            for card in (event for event in run.events if event.get("event") == "card"):
                self.row.notes.append(f"ingest status: {card.get('name')}: safe_to_erase {card.get('safe_to_erase')}, "
                                      f"{card.get('mhl_generations')} generation(s): {'; '.join(card.get('reasons', []))}")


def random_bytes(rng: random.Random, size: int) -> bytes:
    """`size` bytes from `rng`, 64 MiB at a time (randbytes takes at most 256 MiB less a byte)."""
    return b"".join(rng.randbytes(min(64 * MiB, size - start)) for start in range(0, size, 64 * MiB))


def tail(text: str, limit: int = 300) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:limit]


# ---------------------------------------------------------------------------
# Scenarios

KILL_POINTS: dict[str, object] = {
    # name: predicate(event, run) -> kill now
    "scanned": lambda e, r: e["event"] == "scanned",
    "staging-begins": lambda e, r: e["event"] == "staging",
    "first-staged": lambda e, r: e["event"] == "staged",
    "mid-staging": lambda e, r: e["event"] == "staged" and r.count("staged") == 6,
    "upload-preparing": lambda e, r: e["event"] == "upload_preparing",
    "multipart-initiating": lambda e, r: e["event"] == "upload_initiating" and e.get("size", 0) > 5 * MiB,
    "part-1-uploaded": lambda e, r: e["event"] == "part_uploaded" and e.get("part") == 1,
    "mid-parts": lambda e, r: e["event"] == "part_uploaded" and e.get("part") == 2 and e.get("parts", 0) >= 3,
    "last-part-uploaded": lambda e, r: e["event"] == "part_uploaded" and e.get("part") == e.get("parts"),
    "completing": lambda e, r: e["event"] == "upload_completing",
    "first-uploaded": lambda e, r: e["event"] == "uploaded",
    "late-uploaded": lambda e, r: e["event"] == "uploaded" and r.count("uploaded") == 8,
    "summary": lambda e, r: e["event"] == "summary",
}


def kill_at_delayed_call(trace: str, held: list[str] | None = None):
    """A run's watch: follows strace's output file `trace` and stops the run at the first call
    strace holds (its line ends "(DELAYED)", from an `inject=…:delay_exit`), appending that
    line to `held`."""

    def watch(kill, ended: threading.Event) -> None:
        while not os.path.exists(trace) and not ended.wait(0.005):
            pass
        with open(trace, errors="replace") as lines:
            while not ended.is_set():
                line = lines.readline()
                if not line:
                    ended.wait(0.005)
                elif line.rstrip().endswith("(DELAYED)"):
                    if held is not None:
                        held.append(line.strip())
                    kill()
                    return

    return watch


def kill_at(point: str):
    def scenario(ctx: Context) -> None:
        card = ctx.mixed_card()
        ctx.expect(card)
        state = ctx.state()
        if point == "random":
            # A clean run of this card takes well under a second here: a moment within it.
            run = ctx.run(card, state, kill_after=ctx.rng.uniform(0.02, 0.5))
            if not run.killed:
                ctx.row.notes.append(f"run ended (status {run.status}) before its random kill")
        elif point == "resume-reconciling":
            ctx.run(card, state, kill_when=KILL_POINTS["mid-parts"])
            ctx.run(None, state, resume=True,
                    kill_when=lambda e, r: e["event"] in ("upload_reconciling", "part_uploaded"))
        else:
            run = ctx.run(card, state, kill_when=KILL_POINTS[point])
            if not run.killed:
                ctx.row.notes.append(f"event for kill point {point} never came (status {run.status})")
        ctx.finish(card, state)
    return scenario


def proxy_faults(rules: list[str], big: bool = True, seconds: float | None = None, start_on: str | None = None):
    """The proxy's rules while the first run goes: from its start, or from the first `start_on`
    event; for `seconds` only, when given (a storm)."""
    def scenario(ctx: Context) -> None:
        card = ctx.mixed_card(big=big)
        ctx.expect(card)
        state = ctx.state()
        timers: list[threading.Timer] = []

        def begin() -> None:
            ctx.h.proxy.rules(rules)
            if seconds is not None:
                timers.append(threading.Timer(seconds, lambda: ctx.h.proxy.rules([])))
                timers[-1].start()

        def on_event(event, run) -> None:
            if start_on and event["event"] == start_on and not timers and not getattr(run, "begun", False):
                run.begun = True
                begin()

        if not start_on:
            begin()
        run = ctx.run(card, state, timeout=240, on_event=on_event)
        for timer in timers:
            timer.cancel()
        if run.status != 0:
            ctx.row.notes.append(f"first run: status {run.status}: {tail(run.stderr, 200)}")
        ctx.h.proxy.rules([])
        ctx.finish(card, state)
    return scenario


def server_restart(ctx: Context) -> None:
    card = ctx.mixed_card()
    ctx.expect(card)
    state = ctx.state()
    weed = ctx.h.weed
    restarted = threading.Event()

    def restart() -> None:
        weed.stop(kill=True)
        time.sleep(2)
        weed.start()
        try:
            weed.wait(90)
        finally:
            restarted.set()

    def on_event(event, run) -> None:
        if event["event"] == "part_uploaded" and event.get("part") == 2 and not restarted.is_set() \
                and not getattr(run, "restarting", False):
            run.restarting = True
            ctx.faults += 1
            threading.Thread(target=restart, daemon=True).start()

    ctx.run(card, state, on_event=on_event, timeout=240)
    if not restarted.wait(120):
        raise RuntimeError("SeaweedFS did not come back")
    ctx.finish(card, state)


def card_pulled(ctx: Context) -> None:
    loop = F.LoopCard(os.path.join(ctx.dir, "card.img"), os.path.join(ctx.dir, "mnt"), 200, "PULLCARD")
    spec = [(f"DCIM/100MEDIA/DJI_{i:04d}.JPG", ctx.rng.randint(1 * MiB, 3 * MiB)) for i in range(1, 41)]
    spec.append(("DCIM/100MEDIA/DJI_0041.MP4", 12 * MiB))
    ctx.card("card", spec, root=loop.mountpoint)
    ctx.expect(loop.mountpoint)
    loop.remount_ro()  # a cold page cache: the copy reads the "card"
    state = ctx.state()
    cgroup = F.throttle_reads(loop.device, 40 * MiB)  # a card reads at 40 MB/s
    pulled = []

    def pull(event, run) -> bool:
        if event["event"] == "staged" and run.count("staged") == 3 and not pulled:
            loop.pull()
            pulled.append(1)
            ctx.faults += 1
        return False

    run = ctx.run(loop.mountpoint, state, on_event=pull, timeout=240, cgroup=cgroup)
    if pulled and run.status != 74:
        ctx.row.checks_failed.append(f"card pulled mid-copy: exit {run.status}, documented 74: {tail(run.stderr)}")
    if not pulled:
        ctx.row.notes.append("the copy ended before the card could be pulled")
    loop.reinsert()
    F.release_cgroup(cgroup)
    ctx.finish(loop.mountpoint, state)
    loop.release()


def staging_full(ctx: Context) -> None:
    card = ctx.card("card", [(f"DCIM/100MEDIA/DJI_{i:04d}.JPG", 4 * MiB + i) for i in range(1, 13)]
                    + [("DCIM/100MEDIA/DJI_0013.MP4", 14 * MiB)])
    ctx.expect(card)
    tmpfs = F.Tmpfs(os.path.join(ctx.dir, "state"), "24m")
    state = tmpfs.mountpoint
    statuses = []
    for _ in range(8):
        run = ctx.run(card, state, timeout=240)
        statuses.append(run.status)
        if run.status == 73:
            ctx.faults += 1
        if run.status == 0:
            break
    if 73 not in statuses:
        ctx.row.notes.append(f"staging never filled up (statuses {statuses})")
    if any(s not in (0, 73, 1) for s in statuses):
        ctx.row.checks_failed.append(f"full staging disk: statuses {statuses}, documented 73 then 0")
    if statuses[-1] != 0:
        ctx.row.notes.append(f"not done after {len(statuses)} runs on a 24 MiB staging disk: {statuses}")
    ctx.audit_hook = tmpfs.release


def credentials_expiring(ctx: Context) -> None:
    """credential_process hands out keys that live 4 s, and says so ("Expiration"); the server
    forgets each key 1 s after that expiration (SeaweedFS reloads its identities on SIGHUP), and
    a new key is made every second. ingest renews 300 s before an expiration, so with these it
    must fetch fresh credentials for every request, mid-upload, and never send a request signed
    with a key past its expiration. (SeaweedFS answers an unknown key with 403
    InvalidAccessKeyId where AWS would say ExpiredToken.)"""
    weed = ctx.h.weed
    card = ctx.mixed_card()
    ctx.expect(card)
    state = ctx.state()
    creds = os.path.join(ctx.dir, "creds")
    os.makedirs(creds, mode=0o700)
    current = os.path.join(creds, "current")
    calls = os.path.join(creds, "calls")
    helper = os.path.join(creds, "credential-process")
    with open(helper, "w") as out:
        out.write(f"""#!/bin/sh
echo x >> '{calls}'
exec cat '{current}'
""")
    os.chmod(helper, 0o700)
    config = os.path.join(creds, "config")
    with open(os.open(config, os.O_WRONLY | os.O_CREAT, 0o600), "w") as out:
        out.write(f"[default]\ncredential_process = {helper}\n")
    keys: list[list] = []  # [access key, secret, expiration]
    harness_trouble: list[str] = []
    stop = threading.Event()
    lifetime, grace = 4.0, 1.0
    session = botocore.session.get_session()
    handed_out: list[float] = []  # when each key was given to credential_process

    def rotate() -> None:
        now = time.time()
        # Known to the server until the key's expiration (set when it is handed out) plus grace.
        key = ["FAULTSTEMP" + secrets.token_hex(6).upper(), secrets.token_hex(20), now + 60]
        keys.append(key)
        weed.extra = {k: secret for k, secret, expires in keys if expires + grace > now}
        weed.write_identities()
        weed.reload()
        # The server must know the key before anyone is given it: asked with the key itself.
        probe = session.create_client(
            "s3", endpoint_url=weed.endpoint, region_name="us-east-1", aws_access_key_id=key[0],
            aws_secret_access_key=key[1], config=botocore.config.Config(retries={"max_attempts": 1}))
        deadline = time.monotonic() + 5
        while True:
            try:
                probe.head_bucket(Bucket=BUCKET)
                break
            except Exception:
                if time.monotonic() > deadline:
                    harness_trouble.append(f"SeaweedFS did not take key {key[0]} within 5 s")
                    break
                time.sleep(0.05)
        # Its life starts when it is handed out, not when it was made: a reload slowed down by a
        # busy machine must not hand out a key that has already expired.
        key[2] = time.time() + lifetime
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(key[2]))
        text = ('{"Version": 1, "AccessKeyId": "%s", "SecretAccessKey": "%s", "Expiration": "%s"}'
                % (key[0], key[1], expires))
        temporary = current + ".new"
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(text)
        os.replace(temporary, current)
        handed_out.append(time.monotonic())

    def rotator() -> None:
        while not stop.wait(0.5):
            rotate()
            ctx.faults += 1

    rotate()
    thread = threading.Thread(target=rotator, daemon=True)
    thread.start()
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_CONFIG_FILE": config,
           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(creds, "none")}
    # Stretch the upload over several key lifetimes: parts held 3 s without an answer (then
    # retried), others answered 503 SlowDown (retried after a backoff).
    ctx.h.proxy.rules(["stall:PUT:partNumber=:count=16:seconds=3", "slowdown:PUT:*:every=2:count=8"])
    try:
        first = ctx.run(card, state, timeout=240, env=env)
        ctx.h.proxy.rules([])
        refreshes = first.count("credentials_refreshing")
        with open(calls) as lines:
            invocations = len(lines.readlines())
        longest = max((b - a for a, b in zip(handed_out, handed_out[1:])), default=0.0)
        ctx.row.notes.append(f"first run: {first.seconds:.1f} s, status {first.status}, {len(keys)} keys made, "
                             f"credential_process run {invocations} times, {refreshes} credentials_refreshing events, "
                             f"longest gap between keys {longest:.1f} s (a key lives {lifetime:.0f} s)")
        if harness_trouble:
            ctx.row.notes += harness_trouble[:3]
        if first.status != 0:
            ctx.row.checks_failed.append(f"credentials expiring mid-upload: status {first.status}: {tail(first.stderr, 400)}")
        ctx.finish(card, state, env=env)
    finally:
        stop.set()
        thread.join(5)
        weed.extra = {}
        weed.write_identities()
        weed.reload()


def journal_kills(kills: int, files: int):
    """Many small files, so that the journal commits all the time; ingest is killed at a random
    moment of each run (each run takes up what the last left), then run to the end; the
    journal must pass SQLite's integrity check, and nothing may be lost."""
    def scenario(ctx: Context) -> None:
        spec = [(f"DCIM/{100 + i // 200}MEDIA/IMG_{i:04d}.JPG", ctx.rng.randint(1, 8192)) for i in range(files)]
        card = ctx.card("card", spec)
        ctx.expect(card)
        state = ctx.state()
        for _ in range(kills):
            ctx.run(card, state, kill_after=ctx.rng.uniform(0.1, 0.8))
        check_journal(ctx, state)
        ctx.finish(card, state)
        check_journal(ctx, state)
    return scenario


def journal_commit_kills(kills: int, files: int):
    """The journal killed inside a transaction, for certain: strace (outside the process) sends
    SIGKILL as ingest enters its Nth write to the journal's write-ahead log (strace counts per
    thread: the first thread to reach N), so the frames of
    the transaction being committed are written in part and its commit frame never. The WAL
    left behind is read to show the kill landed there (its last frame is no commit); then the
    journal must pass SQLite's integrity check, the card is ingested to the end, and nothing
    may be lost."""
    def scenario(ctx: Context) -> None:
        spec = [(f"DCIM/{100 + i // 200}MEDIA/IMG_{i:04d}.JPG", ctx.rng.randint(1, 8192)) for i in range(files)]
        card = ctx.card("card", spec)
        ctx.expect(card)
        state = ctx.state()
        wal = os.path.join(state, "journal.sqlite-wal")
        inside = 0
        for _ in range(kills):
            nth = ctx.rng.randint(2, 400)
            run = ctx.run(card, state, wrapper=[
                "strace", "-f", "-qq", "-o", "/dev/null", "-P", wal, "-e", "trace=pwrite64,write",
                "-e", f"inject=pwrite64,write:signal=KILL:when={nth}+"])
            if run.status not in (-signal.SIGKILL, 128 + signal.SIGKILL):
                ctx.row.notes.append(f"the run ended ({run.status}) before its write {nth} to the WAL")
                continue
            ctx.faults += 1
            inside += wal_ends_inside_a_transaction(wal)
            check_journal(ctx, state)
        ctx.row.notes.append(f"{inside} of {kills} kills left a transaction half-written in the WAL")
        if inside == 0:
            ctx.row.checks_failed.append("no kill landed inside a transaction: nothing was tested")
        ctx.finish(card, state)
        check_journal(ctx, state)
    return scenario


def wal_ends_inside_a_transaction(wal: str) -> bool:
    """Whether the write-ahead log's last frame of the current generation (its salts match the
    header's) is no commit frame: a transaction was being written when the process died."""
    try:
        with open(wal, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return False
    if len(data) < 32:
        return False
    page_size, salts = struct.unpack(">I", data[8:12])[0], data[16:24]
    offset, last_commit = 32, None
    while offset + 24 + page_size <= len(data) and data[offset + 8:offset + 16] == salts:
        last_commit = struct.unpack(">I", data[offset + 4:offset + 8])[0]
        offset += 24 + page_size
    return last_commit == 0


def check_journal(ctx: Context, state: str) -> None:
    journal = os.path.join(state, "journal.sqlite")
    if not os.path.exists(journal):
        return
    answer = subprocess.run(["sqlite3", "-readonly", journal, "PRAGMA integrity_check;"], capture_output=True,
                            text=True, timeout=60)
    if answer.stdout.strip() != "ok":
        ctx.row.checks_failed.append(f"journal integrity_check: {answer.stdout.strip()[:200]} {answer.stderr.strip()[:200]}")


# ---------------------------------------------------------------------------
# Power cuts: the state directory's file system shut down without flushing its log


class PowerCuts:
    """One repetition's power cuts: its state directory on an ext4 file system of its own
    (F.PowerCutState); a run is cut where it would be killed (kill_after, kill_when, watch): the
    file system shut down first, then ingest killed (it could only get EIO from then on), and
    the image mounted again. At each cut the server is asked how many of the card's bytes it
    holds, and the journal must pass SQLite's integrity check as the cut left it."""

    def __init__(self, ctx: Context, size_mib: int) -> None:
        self.ctx = ctx
        self.fs = F.PowerCutState(os.path.join(ctx.dir, "state.img"), os.path.join(ctx.dir, "state"), size_mib)
        self.state = self.fs.mountpoint
        self.unacknowledged: list[int] = []  # at each cut

    def __enter__(self) -> "PowerCuts":
        return self

    def __exit__(self, *exc) -> None:
        self.fs.release()

    def run(self, card: str | None, **kw) -> F.Run:
        run = self.ctx.run(card, self.state, before_kill=self.fs.cut, **kw)
        if run.killed:
            self.power_back()
        return run

    def seconds_left(self, rate: int) -> float:
        """How long the upload of what the server had not acknowledged at the last cut (before
        any: of everything) takes at `rate` bytes/s."""
        return (self.unacknowledged or [needed_bytes(self.ctx)])[-1] / rate

    def cut_now(self) -> None:
        """The power cut while no ingest runs."""
        self.fs.cut()
        self.ctx.faults += 1
        self.power_back()

    def power_back(self) -> None:
        self.unacknowledged.append(unacknowledged_bytes(self.ctx))
        self.fs.remount()
        check_journal(self.ctx, self.state)

    def finish(self, card: str) -> None:
        """After the cuts: the card is run again until it exits 0 (bounded; failing that is a
        failed check), then `ingest resume` must exit 0, and the journal pass its integrity
        check. A note gives the acknowledged bytes sent again against the bytes the server had
        not acknowledged at the cuts."""
        last = self.ctx.finish(card, self.state, resume_first=False)
        if last.status != 0:
            self.ctx.row.checks_failed.append(f"the card after {self.fs.cuts} power cut(s): last exit {last.status}: "
                                              f"{tail(last.stderr)}")
        resume = self.ctx.run(None, self.state, resume=True)
        if resume.status != 0:
            self.ctx.row.checks_failed.append(f"resume after the power cuts: exit {resume.status}: "
                                              f"{tail(resume.stderr)}")
        check_journal(self.ctx, self.state)
        if self.fs.kept:
            self.ctx.row.notes.append(f"{self.fs.kept} of {self.fs.cuts} cut(s) kept a write that was not synced")
            if self.fs.kept == self.fs.cuts:
                self.ctx.row.checks_failed.append("no power cut lost a write that was not synced: nothing was tested")
        resent = self.ctx.h.proxy.stats().get("resent_acknowledged_bytes", 0)
        at_cuts = ", ".join(f"{b / MiB:.1f}" for b in self.unacknowledged) or "-"
        self.ctx.row.notes.append(
            f"{self.fs.cuts} cut(s); not acknowledged at them: {at_cuts} MiB of {needed_bytes(self.ctx) / MiB:.1f}; "
            f"acknowledged bytes sent again: {resent / MiB:.1f} MiB")


def needed_bytes(ctx: Context) -> int:
    """One copy of each distinct content of the repetition's cards."""
    return sum({f.xxh128: f.size for f in ctx.files}.values())


def unacknowledged_bytes(ctx: Context) -> int:
    """The cards' bytes the server holds no copy of: one copy of each distinct content, less the
    current objects under the repetition's prefix and the parts of its open multipart uploads
    (each part number of a key once)."""
    client, prefix = ctx.h.client, ctx.device_id + "/"
    held = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        held += sum(item["Size"] for item in page.get("Contents", []))
    parts: dict[tuple[str, int], int] = {}
    for upload in client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", []):
        for page in client.get_paginator("list_parts").paginate(Bucket=BUCKET, Key=upload["Key"],
                                                                UploadId=upload["UploadId"]):
            for part in page.get("Parts", []):
                parts[(upload["Key"], part["PartNumber"])] = part["Size"]
    return max(0, needed_bytes(ctx) - held - sum(parts.values()))


def small_files_spec(ctx: Context) -> list[tuple[str, int]]:
    """60 photos of 1 to 200 KiB and two files a little over 1 MiB."""
    spec = [(f"DCIM/100MEDIA/IMG_{i:04d}.JPG", ctx.rng.randint(1024, 200 * 1024)) for i in range(1, 61)]
    return spec + [("DCIM/100MEDIA/IMG_0061.MOV", MiB + 4321), ("DCIM/100MEDIA/IMG_0062.MOV", MiB + 65537)]


def power_cut_small(cuts: int):
    """60 small files and two a little over 1 MiB (8 MiB, uploaded at 2MiB/s so that the first
    run lasts about 4 s); the power cut at a random moment of each of `cuts` runs (within the
    time what is left would take, a run's start included), each run taking up what the last
    left; then the card is run to the end: nothing lost or duplicated, the journal intact."""
    def scenario(ctx: Context) -> None:
        card = ctx.card("card", small_files_spec(ctx))
        ctx.expect(card)
        with PowerCuts(ctx, 512) as power:
            for _ in range(cuts):
                run = power.run(card, options=["--max-rate", "2MiB/s"],
                                kill_after=ctx.rng.uniform(0.02, 0.75) * (0.2 + power.seconds_left(2 * MiB)))
                if not run.killed:
                    ctx.row.notes.append(f"a run ended (status {run.status}) before its power cut")
            power.finish(card)
    return scenario


def power_cut_large(size: int, rate: int, cuts: int, stream: bool):
    """Two large files uploaded slowly (--max-rate `rate` bytes/s), their parts streamed while
    they are copied (the default) or sent once staged (stream_parts = false); the power cut lands
    in the middle of their uploads (once the first parts in flight could be done, at 20 to 70 %
    of the time what is left would take), `cuts` times, each run taking up what the last left;
    then the card is run to the end: nothing lost, duplicated or left open."""
    def scenario(ctx: Context) -> None:
        if not stream:
            ctx.configure("upload", "stream_parts = false")
        card = ctx.card("card", [("DCIM/100MEDIA/DJI_0001.MP4", size), ("DCIM/100MEDIA/DJI_0002.MP4", size + 12345)])
        ctx.expect(card)
        streamed = 0
        with PowerCuts(ctx, 2 * size // MiB + 512) as power:
            for _ in range(cuts):
                left = power.seconds_left(rate)
                first_parts = 8 * PART_SIZE / rate  # [upload] parts_in_flight: 8
                run = power.run(card, options=["--max-rate", f"{rate // MiB}MiB/s"], timeout=left * 2 + 120,
                                kill_after=first_parts + ctx.rng.uniform(0.2, 0.7) * left)
                streamed += run.count("stream_started")
                if not run.killed:
                    ctx.row.notes.append(f"a run ended (status {run.status}) before its power cut")
                elif not run.count("part_uploaded"):
                    ctx.row.notes.append("a power cut came before the first part was uploaded")
            if stream and not streamed:
                ctx.row.checks_failed.append("no file was streamed (no stream_started): nothing was tested")
            if not stream and streamed:
                ctx.row.checks_failed.append(f"{streamed} file(s) streamed with stream_parts = false")
            power.finish(card)
    return scenario


def power_cut_after_success(ctx: Context) -> None:
    """A run that exits 0 has told the station the card is done; the power cut right after it
    (before the file system's log went to disk on its own, every 5 s) must undo none of it: the
    card's next run finds every file known, stages nothing and sends nothing (no staged,
    stream_started, upload_initiating, part_uploaded or uploaded event, no PUT acknowledged by
    the server)."""
    card = ctx.card("card", small_files_spec(ctx) + [("DCIM/100MEDIA/DJI_0063.MP4", 16 * MiB + 99)])
    ctx.expect(card)
    with PowerCuts(ctx, 512) as power:
        first = ctx.run(card, power.state)
        if first.status != 0:
            ctx.row.checks_failed.append(f"the first run (no fault yet): exit {first.status}: {tail(first.stderr)}")
        power.cut_now()
        before = ctx.h.proxy.stats()
        again = ctx.run(card, power.state)
        puts = ctx.h.proxy.stats()["acknowledged_puts"] - before["acknowledged_puts"]
        work = {name: again.count(name) for name in ("staged", "stream_started", "upload_initiating", "part_uploaded",
                                                     "uploaded")}
        done = ", ".join(f"{count} {name}" for name, count in work.items() if count)
        ctx.row.notes.append(f"after the cut: exit {again.status}, {done or 'no work'}, {puts} PUT(s) acknowledged")
        if first.status == 0 and (again.status != 0 or done or puts):
            ctx.row.checks_failed.append(f"a run exited 0 for work the power cut right after it undid: the next run "
                                         f"(exit {again.status}) did {done or 'no staging or upload'}, "
                                         f"{puts} PUT(s) acknowledged")
        power.finish(card)


def power_cut_checkpoints(cuts: int, files: int):
    """Many small files, so that the journal's write-ahead log is checkpointed into the database
    again and again; the power cut lands inside a checkpoint: strace holds ingest for a second
    right after its Nth write (N at random) to journal.sqlite itself, which in WAL mode only a
    checkpoint makes, and the cut comes then, the checkpoint's pages written, the database not
    yet synced. (Until the journal exists, a run is cut at a random moment instead: the writes
    that create it are no checkpoint.) The row fails when no cut landed inside a checkpoint. Then
    the card is run to the end: nothing lost, the journal intact."""
    def scenario(ctx: Context) -> None:
        spec = [(f"DCIM/{100 + i // 200}MEDIA/IMG_{i:04d}.JPG", ctx.rng.randint(1, 8192)) for i in range(files)]
        card = ctx.card("card", spec)
        ctx.expect(card)
        inside = 0
        with PowerCuts(ctx, 512) as power:
            journal = os.path.join(power.state, "journal.sqlite")
            for index in range(cuts):
                if not os.path.exists(journal):
                    power.run(card, kill_after=ctx.rng.uniform(0.1, 1.0))
                    continue
                trace = os.path.join(ctx.dir, f"strace-{index}.out")
                held: list[str] = []
                nth = ctx.rng.randint(1, 800)
                run = power.run(card, watch=kill_at_delayed_call(trace, held), wrapper=[
                    "strace", "-f", "-qq", "--seccomp-bpf", "-e", "signal=none", "-y", "-o", trace, "-P", journal,
                    "-e", "trace=pwrite64,pwritev,fsync,fdatasync,ftruncate",
                    "-e", f"inject=pwrite64:delay_exit=1000000:when={nth}"])
                if held and run.killed:
                    inside += 1
                else:
                    ctx.row.notes.append(f"a run ended (status {run.status}) before its write {nth} to journal.sqlite")
            ctx.row.notes.append(f"{inside} of {cuts} cuts landed inside a checkpoint")
            if inside == 0:
                ctx.row.checks_failed.append("no power cut landed inside a checkpoint: nothing was tested")
            power.finish(card)
    return scenario


def killed_streaming_card_removed(ctx: Context) -> None:
    """kill -9 while a 256 MiB file streams (its parts sent while it is copied, --max-rate
    8MiB/s), then the card taken out of the reader: `ingest resume` must land the object byte
    for byte from what was staged, sending no more than the server had not acknowledged at the
    kill plus two parts (parts the server took as ingest died, which it cannot know of)."""
    # Removed before its copy ended, the card is not known whole: no history is written, and
    # it is not safe to erase, until it is ingested again.
    ctx.history = "if-present"
    loop = F.LoopCard(os.path.join(ctx.dir, "card.img"), os.path.join(ctx.dir, "mnt"), 300, "STREAMCARD")
    ctx.card("card", [("DCIM/100MEDIA/DJI_0001.MP4", 256 * MiB)], root=loop.mountpoint)
    ctx.expect(loop.mountpoint)
    loop.remount_ro()
    state = ctx.state()
    run = ctx.run(loop.mountpoint, state, options=["--max-rate", "8MiB/s"], kill_after=14)
    if not run.count("stream_started"):
        ctx.row.checks_failed.append(f"the file was not streamed (no stream_started; exit {run.status}): "
                                     f"nothing was tested")
    unacknowledged = unacknowledged_bytes(ctx)
    loop.release()
    ctx.faults += 1
    before = ctx.h.proxy.stats()["bytes_to_upstream"]
    resume = ctx.run(None, state, resume=True)
    sent = ctx.h.proxy.stats()["bytes_to_upstream"] - before
    ctx.row.notes.append(f"killed after 14 s ({run.count('part_uploaded')} parts uploaded): "
                         f"{unacknowledged / MiB:.1f} MiB not acknowledged; resume (exit {resume.status}) sent "
                         f"{sent / MiB:.1f} MiB")
    if resume.status != 0:
        ctx.row.checks_failed.append(f"resume with the card gone: exit {resume.status}: {tail(resume.stderr)}")
        ctx.finish(None, state, resume_first=False)
    if sent > unacknowledged + 2 * PART_SIZE:
        ctx.row.checks_failed.append(f"resume sent {sent / MiB:.1f} MiB, more than the {unacknowledged / MiB:.1f} MiB "
                                     f"not acknowledged at the kill plus two parts")
    check_journal(ctx, state)


# ---------------------------------------------------------------------------
# A card's ASC MHL history: kills, power cuts and lost answers around its write
#
# Once every file of a card is verified, ingest writes a generation of the card's history:
# manifest and chain to the state directory (fsync), the generation journalled, then the
# manifest PUT (If-None-Match), then the chain PUT (If-None-Match for the first generation,
# If-Match on the ETag the last one left for the later ones). Each repetition ingests a card
# (generation 1), then adds files to it (one a copy of a photo: a server-side copy) and ingests
# it again (generation 2, its chain written with If-Match), each time stopped at its point and
# then taken up by `ingest resume` or by a rerun of the card (by turns: one of the two batches
# each way), then run to the end. Checked, besides the common audit (which verifies the
# history with ascmhl, and with kills requires exactly 2 generations): right after the resume
# or the rerun, the history in the bucket has one generation per batch (with power cuts up to
# one more per cut: a cut can make the journal forget files it had scanned, which a later run
# lists in a generation of their own) and lists every file of the card; `ingest status --json`
# then says the card is safe to erase, with that many generations; and whenever ingest says
# the card is safe to erase (a run's summary; status after a cut, before anything runs, and
# after the resume or rerun), the bucket backs it at that moment: each file of the card an
# object of its folder of the right size and x-amz-meta-xxh128, listed with its xxh128 by a
# generation whose manifest and chain entry are in the bucket.

MANIFEST_PUT = r"~/ascmhl/[0-9]{4}_[^/?]*\.mhl(\?|$)"  # the proxy's pattern for the manifest's PUT
CHAIN_PUT = "/ascmhl/ascmhl_chain.xml"
# A clip's second HEAD (after=1: the first looks at the key before its stream starts), the one
# that verifies it after its CompleteMultipartUpload: DJI_0101.MP4 in the first batch,
# DJI_0201.MP4 in the second.
CLIP_HEAD = r"~/DJI_0{batch}01\.MP4($|\?):after=1"

# point: (row name's end, proxy action, method, pattern). "first-staged": at the run's first
# "staged" event, long before the history: a resume must not make a card safe to erase whose files
# it has not all seen in the bucket. "clip-verify": the HEAD that verifies a clip (a streamed
# multipart upload) after its CompleteMultipartUpload is held, never answered, and the run stopped
# 0.3 s into the hold: the object is in the bucket, the upload journalled as completed but not
# verified, its file not yet verified; other uploads may be in flight (the first batch).
# "local-write": strace holds ingest for a second at its mkdir of <state>/custody, which it makes
# (EEXIST or not) as it starts writing a generation to its local history: every file verified, the
# generation not yet journalled, and the run stopped then. The proxy's points: the PUT held
# ("stall": read, never forwarded; "delay": forwarded 1 s later, after the kill or the cut) and
# the run stopped 0.3 s into the hold. "summary": at the summary line, after the history (with a
# power cut: right after the run, if it has ended). "after-last-object": a random moment within
# HISTORY_WINDOW after the card's last object is in the bucket (with a power cut: right after the
# run, if it has ended).
HISTORY_POINTS: dict[str, tuple[str, str | None, str | None, str | None]] = {
    "first-staged": ("at the first staged file", None, None, None),
    "clip-verify": ("while a clip's HEAD after its CompleteMultipartUpload is held", "stall", "HEAD", CLIP_HEAD),
    "local-write": ("as the local history is written (strace holds its mkdir)", None, None, None),
    "manifest-held": ("while the manifest PUT is held (never sent on)", "stall", "PUT", MANIFEST_PUT),
    "manifest-late": ("while the manifest PUT is held (sent on after it)", "delay", "PUT", MANIFEST_PUT),
    "chain-held": ("while the chain PUT is held (never sent on)", "stall", "PUT", CHAIN_PUT),
    "chain-late": ("while the chain PUT is held (sent on after it)", "delay", "PUT", CHAIN_PUT),
    "summary": ("at the summary line", None, None, None),
    "after-last-object": ("at random moments after the last object", None, None, None),
}
# Seconds after the card's last object is seen in the bucket (listed every 5 ms): the random
# kill's range. Unstopped runs here ended 75 to 100 ms after it; a power cut takes a few ms more.
HISTORY_WINDOW = 0.06


def second_batch(ctx: Context, card: str) -> None:
    """Files added to the card after its first generation: a new photo, a new 6 MiB clip
    (multipart), and a copy of a photo already in the bucket (a server-side copy)."""
    ctx.card("card", [("DCIM/102MEDIA/DJI_0200.JPG", ctx.rng.randint(64 * 1024, MiB)),
                      ("DCIM/102MEDIA/DJI_0201.MP4", 6 * MiB + 77)], root=card)
    copy = os.path.join(card, "DCIM/102MEDIA/DJI_0202.JPG")
    shutil.copyfile(os.path.join(card, "DCIM/100MEDIA/DJI_0002.JPG"), copy)
    os.utime(copy, (CARD_MTIME, CARD_MTIME))
    ctx.files = F.card_files(card)


def card_objects(ctx: Context) -> dict[str, int]:
    """The card's objects under the repetition's prefix, its history's left out: key -> size."""
    objects = {}
    for page in ctx.h.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=ctx.device_id + "/"):
        for item in page.get("Contents", []):
            if not F.HISTORY_KEY.match(item["Key"]):
                objects[item["Key"]] = item["Size"]
    return objects


def card_history(ctx: Context) -> tuple[str | None, F.History | None]:
    """The repetition's one card folder (the default template) and the history it holds now."""
    folders = {F.card_folder(key) for key in card_objects(ctx)}
    if len(folders) != 1:
        return None, None
    folder = folders.pop()
    return folder, F.folder_history(ctx.h.client, BUCKET, folder)


def unbacked(ctx: Context) -> list[str]:
    """Why the bucket does not back "safe to erase" for the card as ctx.files has it now: a
    file that is no object of its folder (of its size and x-amz-meta-xxh128), or is listed by
    no generation in the bucket (manifest and chain entry) with its xxh128; empty if it does."""
    objects = card_objects(ctx)
    folders = {F.card_folder(key) for key in objects}
    if len(folders) != 1:
        return [f"the card's objects are in {len(folders)} folders, not one"]
    folder = folders.pop()
    history = F.folder_history(ctx.h.client, BUCKET, folder)
    problems = list(history.problems)
    for f in ctx.files:
        path = F.key_path(f.path)
        key = folder + path
        if objects.get(key) != f.size:
            problems.append(f"{path} is no object of its size ({objects.get(key)})")
            continue
        # Multipart objects carry their fingerprint in a tag, not in x-amz-meta-xxh128 (the
        # audit downloads every byte at the end).
        recorded = ctx.h.client.head_object(Bucket=BUCKET, Key=key).get("Metadata", {}).get("xxh128")
        if recorded is not None and recorded != f.xxh128:
            problems.append(f"{key} has x-amz-meta-xxh128 {recorded}, the card file {f.xxh128}")
        listed = history.listed.get(path)
        if listed is None or listed[1] != f.xxh128:
            problems.append(f"{path} is in no generation of the history in the bucket "
                            f"({len(history.chain)} chained, {len(history.manifests)} manifest(s))")
    return problems


class Verdicts:
    """Every verdict ingest gives of the card, held against the bucket as it is when given: a
    card said safe to erase must have each file in the bucket and in a generation there."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.safe_claims = 0

    def hold(self, where: str) -> None:
        self.safe_claims += 1
        problems = unbacked(self.ctx)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            self.ctx.row.checks_failed.append(f"{where} said safe_to_erase: true while {problems[0]}{more}")

    def on_event(self, event: dict, run: F.Run) -> None:
        if event.get("event") == "summary" and event.get("safe_to_erase") is True:
            self.hold("a run's summary")

    def status(self, state: str, where: str, expect_safe: bool = False, generations: int | None = None) -> None:
        """`ingest status --json`: its verdict held against the bucket; with `expect_safe`, the
        card must be safe to erase, with `generations` generations."""
        run = self.ctx.command(["status", "--state-dir", state, "--config", self.ctx.config, "--json"], timeout=60)
        cards = [event for event in run.events if event.get("event") == "card"]
        if run.status != 0 or len(cards) != 1:
            self.ctx.row.checks_failed.append(f"status {where}: exit {run.status}, {len(cards)} card(s): "
                                              f"{tail(run.stderr)}")
            return
        card = cards[0]
        if card.get("safe_to_erase") is True:
            self.hold(f"status {where}")
        elif expect_safe:
            self.ctx.row.checks_failed.append(f"status {where}: the card is not safe to erase: {card.get('reasons')}")
        if expect_safe and generations is not None and card.get("mhl_generations") != generations:
            self.ctx.row.checks_failed.append(f"status {where}: mhl_generations {card.get('mhl_generations')}, "
                                              f"{generations} expected")


def history_check_now(ctx: Context, generations: int, after: str, more: int = 0, complete: bool = True) -> int:
    """Right after `after` (a resume, a rerun): the history in the bucket has `generations`
    generations (up to `more` more: a power cut can make the journal forget files it had
    scanned, which a later run finds and lists in a generation of their own) and lists every
    file of the card with its xxh128. Not `complete` (a resume after a stop before every file
    was staged: the files left on the card wait for its next run), only that what it holds is
    consistent. Returns how many generations it has."""
    folder, history = card_history(ctx)
    if history is None:
        ctx.row.checks_failed.append(f"after {after}: the card's objects are not in one folder")
        return 0
    problems = list(history.problems)
    if not complete:
        if problems:
            ctx.row.checks_failed.append(f"after {after}: {folder}ascmhl/: " + "; ".join(problems[:3]))
        return len(history.chain)
    if not generations <= len(history.chain) <= generations + more or len(history.manifests) != len(history.chain):
        problems.append(f"{len(history.chain)} generation(s) chained, {len(history.manifests)} manifest(s), "
                        f"{generations}{f' to {generations + more}' if more else ''} expected")
    unlisted = [f for f in ctx.files if history.listed.get(F.key_path(f.path), (0, ""))[1] != f.xxh128]
    if unlisted:
        problems.append(f"{len(unlisted)} file(s) of the card in no generation ({F.key_path(unlisted[0].path)}…)")
    if problems:
        ctx.row.checks_failed.append(f"after {after}: {folder}ascmhl/: " + "; ".join(problems[:3]))
    return len(history.chain)


def history_stage(ctx: Context, generation: int) -> str:
    """How far generation `generation` got in the bucket: for the notes."""
    _, history = card_history(ctx)
    if history is None:
        return "no folder"
    manifests = len([name for name in history.manifests if name.startswith(f"{generation:04d}_")])
    chained = len(history.chain) >= generation
    return "chained" if chained else ("manifest only" if manifests else "nothing")


def proxy_rule_fired(ctx: Context) -> int:
    """How many requests the proxy's rules picked (GET /rules: the rules with their counters)."""
    rules = ctx.h.proxy.call("GET", "/rules")
    rules = rules.get("rules", []) if isinstance(rules, dict) else rules
    return sum(rule.get("fired", 0) for rule in rules)


def stopped_run(ctx: Context, cuts: "PowerCuts | None", card: str, state: str, point: str, generation: int,
                verdicts: Verdicts) -> F.Run:
    """The card's run that writes generation `generation`, killed (or its power cut, with
    `cuts`) at `point`."""
    _, action, method, pattern = HISTORY_POINTS[point]
    kw: dict = {"on_event": verdicts.on_event}
    moments: dict[str, float] = {}  # when the card's objects were all in the bucket, when the run ended
    if action:
        pattern = pattern.replace("{batch}", str(generation))
        ctx.h.proxy.rules([f"{action}:{method}:{pattern}:count=1:seconds={1 if action == 'delay' else 30}"])

        def held(kill, ended: threading.Event) -> None:
            while not ended.wait(0.01):
                if proxy_rule_fired(ctx):
                    if not ended.wait(0.3):
                        kill()
                    return
        kw["watch"] = held
    elif point == "local-write":
        trace = os.path.join(ctx.dir, f"strace-{len(os.listdir(ctx.dir))}.out")
        custody = os.path.join(state, "custody")
        kw["wrapper"] = ["strace", "-f", "-qq", "-e", "signal=none", "-o", trace, "-P", custody,
                         "-e", "trace=mkdir,mkdirat", "-e", "inject=mkdir,mkdirat:delay_exit=1000000:when=1"]

        kw["watch"] = kill_at_delayed_call(trace)
    elif point == "first-staged":
        kw["kill_when"] = lambda event, run: event["event"] == "staged"
    elif point == "summary":
        # At the summary line. The kill comes from a thread of its own, so that the verdict's
        # check (S3 requests, in on_event) does not delay it.
        summary = threading.Event()

        def on_summary(event, run) -> None:
            if event["event"] == "summary":
                summary.set()
            verdicts.on_event(event, run)

        def at_summary(kill, ended: threading.Event) -> None:
            while not summary.wait(0.002):
                if ended.is_set():
                    return
            kill()
        kw.update(on_event=on_summary, watch=at_summary)
    else:
        # A random moment after the card's last object is in the bucket: the bucket is
        # listed every 5 ms (the --json lines are held up to 50 ms, too late to time this by).
        delay = ctx.rng.uniform(0, HISTORY_WINDOW)

        def after_last(kill, ended: threading.Event) -> None:
            want = len(ctx.files)
            while len(card_objects(ctx)) < want:
                if ended.wait(0.005):
                    return
            moments["objects"] = time.monotonic()
            if not ended.wait(delay):
                kill()
            else:
                moments["ended"] = time.monotonic()
        kw["watch"] = after_last
    if "watch" in kw:
        watch = kw["watch"]

        def guarded(kill, ended) -> None:  # a harness error in the watch is no quiet "not stopped"
            try:
                watch(kill, ended)
            except Exception as error:
                ctx.row.error = ctx.row.error or f"watch: {type(error).__name__}: {error}"
        kw["watch"] = guarded
    try:
        run = cuts.run(card, **kw) if cuts else ctx.run(card, state, **kw)
    finally:
        ctx.h.proxy.rules([])
    if action == "delay" and run.killed:
        # The held PUT reaches the server after the kill or the cut (a second into its hold).
        reached = "chained" if pattern == CHAIN_PUT else "manifest only"
        deadline = time.monotonic() + 10
        while history_stage(ctx, generation) not in (reached, "chained") and time.monotonic() < deadline:
            time.sleep(0.1)
    run.history_ms = None  # from the last object in the bucket to the run's end, when not stopped
    if "objects" in moments and "ended" in moments:
        run.history_ms = (moments["ended"] - moments["objects"]) * 1000
    run.cut_after_exit = False
    if cuts and point in ("summary", "after-last-object") and not run.killed:
        cuts.cut_now()  # the run had ended: the power cut right after it, as it is
        run.killed = run.cut_after_exit = True
    return run


def history_fault(point: str, power: bool):
    """Two batches of a card (generations 1 and 2), each run killed (`power`: its power cut)
    at `point` of its history's write, then taken up by `ingest resume` or a rerun; the power
    cut's "durable place" (status after the cut, before anything runs) is held against the
    bucket too."""
    def scenario(ctx: Context) -> None:
        card = ctx.mixed_card()
        ctx.expect(card)
        # One generation per batch; up to one more per stop with power cuts (the journal can
        # forget files it had scanned) or a stop before the card's files are all journalled
        # (the resume lists those it knows, a rerun the rest): history_check_now.
        early = point == "first-staged"
        ctx.generations = None if power or early else 2
        verdicts = Verdicts(ctx)
        stages = []
        extra = 0  # generations beyond one per batch (power cuts only)
        cuts = PowerCuts(ctx, 512) if power else None
        try:
            state = cuts.state if cuts else ctx.state()
            for batch in (1, 2):
                if batch == 2:
                    second_batch(ctx, card)
                run = stopped_run(ctx, cuts, card, state, point, batch, verdicts)
                if not run.killed:
                    ctx.row.notes.append(f"batch {batch}: the run ended (status {run.status}) before it was stopped")
                stages.append(f"{history_stage(ctx, batch)}" + ("" if run.killed else " (not stopped)")
                              + (" (cut as the run exited)" if run.cut_after_exit else "")
                              + (f" (it ended {run.history_ms:.0f} ms after the last object)"
                                 if run.history_ms is not None and not run.killed else ""))
                if cuts:
                    verdicts.status(state, f"after the power cut of batch {batch}")
                how = "ingest resume" if (batch + ctx.rep) % 2 else "a rerun of the card"
                again = ctx.run(None, state, resume=True) if how == "ingest resume" else \
                    ctx.run(card, state, on_event=verdicts.on_event)
                if again.status != 0:
                    ctx.row.checks_failed.append(f"batch {batch}: {how} after the {'cut' if cuts else 'kill'}: "
                                                 f"exit {again.status}: {tail(again.stderr)}")
                slack = cuts.fs.cuts if cuts else batch if early else 0
                history_check_now(ctx, batch + extra, f"batch {batch}'s {how}", max(0, slack - extra),
                                  complete=not (early and how == "ingest resume"))
                verdicts.status(state, f"after batch {batch}'s {how}")
                last = ctx.finish(card, state, resume_first=False, on_event=verdicts.on_event)
                if last.status != 0:
                    ctx.row.checks_failed.append(f"batch {batch}: the card's reruns: exit {last.status}")
                extra = history_check_now(ctx, batch + extra, f"batch {batch}'s reruns", max(0, slack - extra)) - batch
                extra = max(0, extra)
                verdicts.status(state, f"after batch {batch}", expect_safe=True, generations=batch + extra)
            if cuts:
                cuts.finish(card)
        finally:
            if cuts:
                cuts.fs.release()
        ctx.row.notes.append(f"stopped with generation 1: {stages[0]}, generation 2: {stages[1]} in the bucket; "
                             f"{verdicts.safe_claims} safe-to-erase verdicts held against the bucket"
                             + (f"; {2 + extra} generations (files the journal did not know at a stop, listed later)"
                                if extra else ""))
    return scenario


def history_answers_lost(pattern: str, what: str):
    """The server writes the `what` PUT but its answer is lost (the proxy cuts it off):
    generation 1 loses one answer (its chain written with If-None-Match), generation 2 (its
    chain with If-Match) every answer of that PUT during its first run. A run may fail, never
    for good: `ingest resume` or a rerun (by turns) finishes it, with no second generation."""
    def scenario(ctx: Context) -> None:
        card = ctx.mixed_card()
        ctx.expect(card)
        ctx.generations = 2
        verdicts = Verdicts(ctx)
        state = ctx.state()
        said = []
        for batch in (1, 2):
            if batch == 2:
                second_batch(ctx, card)
            ctx.h.proxy.rules([f"truncate:PUT:{pattern}" + (":count=1" if batch == 1 else "")])
            try:
                run = ctx.run(card, state, timeout=240, on_event=verdicts.on_event)
                lost = proxy_rule_fired(ctx)
            finally:
                ctx.h.proxy.rules([])
            said.append(f"batch {batch}: {lost} answer(s) lost, exit {run.status}"
                        + (f" ({tail(run.stderr, 120)})" if run.status else ""))
            if not lost:
                ctx.row.checks_failed.append(f"batch {batch}: no answer of the {what} PUT was lost: nothing was tested")
            if run.status != 0:
                how = "ingest resume" if (batch + ctx.rep) % 2 else "a rerun of the card"
                again = ctx.run(None, state, resume=True) if how == "ingest resume" else \
                    ctx.run(card, state, on_event=verdicts.on_event)
                if again.status != 0:
                    ctx.row.checks_failed.append(f"batch {batch}: {how} after the lost answers: exit {again.status}: "
                                                 f"{tail(again.stderr)}")
                history_check_now(ctx, batch, f"batch {batch}'s {how}")
            else:
                history_check_now(ctx, batch, f"batch {batch}'s run")
            ctx.finish(card, state, resume_first=False, on_event=verdicts.on_event)
            history_check_now(ctx, batch, f"batch {batch}'s reruns")
            verdicts.status(state, f"after batch {batch}", expect_safe=True, generations=batch)
        ctx.row.notes.append("; ".join(said))
    return scenario


def racing(ctx: Context) -> None:
    card = ctx.mixed_card()
    ctx.expect(card)
    state = ctx.state()
    runs = run_together(ctx, [(card, state), (card, state)])
    statuses = sorted(run.status for run in runs)
    if statuses not in ([0, 0], [0, 75]):
        ctx.row.checks_failed.append(f"two ingests of one card at once: statuses {statuses}, documented 0 and 75")
    ctx.finish(card, state, resume_first=False)


def racing_device(ctx: Context) -> None:
    """Two `ingest --device` for one unmounted card at once (two udev triggers): each mounts it
    itself; the second must step aside (a notice, exit 0)."""
    loop = F.LoopCard(os.path.join(ctx.dir, "card.img"), os.path.join(ctx.dir, "mnt"), 96, "RACECARD")
    ctx.card("card", ctx.mixed_spec(), root=loop.mountpoint)
    ctx.expect(loop.mountpoint)
    subprocess.run(["sync"], check=False)
    subprocess.run(["umount", loop.mountpoint], check=True)
    state = ctx.state()
    env = {"RUNTIME_DIRECTORY": ctx.state("run")}
    runs = run_together(ctx, [(loop.device, state), (loop.device, state)], env=env, device=True)
    statuses = sorted(run.status for run in runs)
    if statuses != [0, 0]:
        ctx.row.checks_failed.append(f"two ingest --device at once: statuses {statuses}, documented 0 and 0 (a notice)")
    for _ in range(3):
        last = ctx.run(None, state, device=loop.device, env=env)
        if last.status == 0:
            break
    loop.release()


def run_together(ctx: Context, jobs: list[tuple[str, str]], timeout: float = 240, env=None,
                 device: bool = False) -> list[F.Run]:
    results: list[F.Run | None] = [None] * len(jobs)

    def one(index: int, card: str, state: str) -> None:
        if device:
            results[index] = ctx.run(None, state, timeout=timeout, device=card, env=env)
        else:
            results[index] = ctx.run(card, state, timeout=timeout, env=env)

    threads = [threading.Thread(target=one, args=(i, card, state)) for i, (card, state) in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 30)
    return [run for run in results if run is not None]


def twin_cards(ctx: Context, label: str = "FIELDCARD") -> tuple[F.LoopCard, F.LoopCard]:
    """Two ext4 cards with the same label and the same paths, different bytes."""
    cards = []
    for name in ("a", "b"):
        loop = F.LoopCard(os.path.join(ctx.dir, f"{name}.img"), os.path.join(ctx.dir, f"mnt-{name}"), 64, label)
        ctx.card(name, [(f"DCIM/100MEDIA/DJI_{i:04d}.JPG", 200000 + i) for i in range(1, 6)]
                 + [("DCIM/100MEDIA/DJI_0006.MP4", 7 * MiB)], root=loop.mountpoint)
        ctx.expect(loop.mountpoint)
        loop.remount_ro()
        cards.append(loop)
    return cards[0], cards[1]


def same_label(together: bool):
    def scenario(ctx: Context) -> None:
        a, b = twin_cards(ctx)
        state = ctx.state()
        if together:
            run_together(ctx, [(a.mountpoint, state), (b.mountpoint, state)])
        ctx.finish(a.mountpoint, state, resume_first=False)
        ctx.finish(b.mountpoint, state, resume_first=False)
        a.release()
        b.release()
    return scenario


def server_ignoring_conditions(ctx: Context) -> None:
    """A server that ignores If-None-Match, as far as ingest can tell: the proxy answers every
    412 with 200 and the body's ETag (unconditional). ingest's probe must find out and say so
    (conditional_writes_not_honoured), then look at each key before it writes: two cards whose
    files meet at one key (a template without {card_id}), ingested one after the other, must leave
    the first card's objects as they were and send the second's to their alternative keys. A write
    made without looking would be answered 200 and lost (the server kept the first card's bytes)."""
    ctx.configure("s3", 'key_template = "{device}/{path}"')
    a, b = twin_cards(ctx)
    state = ctx.state()
    ctx.h.proxy.rules(["unconditional:PUT,POST:*"])
    try:
        for name, card in (("first", a), ("second", b)):
            run = ctx.run(card.mountpoint, state)
            if not run.count("conditional_writes_not_honoured"):
                ctx.row.checks_failed.append(f"the {name} run did not warn that the server ignores If-None-Match")
            if run.status != 0:
                ctx.row.checks_failed.append(f"the {name} run ended {run.status}: {tail(run.stderr)}")
        moved = run.count("key_taken")
        ctx.row.notes.append(f"the second card: {moved} files sent to their alternative keys")
        if moved != 6:
            ctx.row.checks_failed.append(f"the second card sent {moved} files, not 6, to alternative keys")
    finally:
        ctx.h.proxy.rules([])
    ctx.finish(a.mountpoint, state, resume_first=False)
    ctx.finish(b.mountpoint, state, resume_first=False)
    a.release()
    b.release()


def two_stations(same_content: bool):
    def scenario(ctx: Context) -> None:
        s1, s2 = ctx.state("station-1"), ctx.state("station-2")
        if same_content:
            card = ctx.mixed_card()
            ctx.expect(card)
            run_together(ctx, [(card, s1), (card, s2)])
            ctx.finish(card, s1, resume_first=False)
            ctx.finish(card, s2, resume_first=False)
        else:
            a, b = twin_cards(ctx)
            run_together(ctx, [(a.mountpoint, s1), (b.mountpoint, s2)])
            ctx.finish(a.mountpoint, s1, resume_first=False)
            ctx.finish(b.mountpoint, s2, resume_first=False)
            a.release()
            b.release()
    return scenario


HOSTILE_NAMES: list[bytes] = [
    b"a\nb.jpg", b"a_b.jpg",                       # a newline, and what it would be escaped to
    b"\xff\xfe.jpg", b"%FF%FE.jpg",                # bytes that are not UTF-8, and their percent-spelling
    b"t\tb.jpg", b"t%09b.jpg",                     # a tab
    "café.jpg".encode(), F.nfd("café.jpg").encode(),  # NFC and NFD twins
    b"x\\y.jpg", b"x/y.jpg",                       # a backslash, and a directory
    b"a b.jpg", b"a+b.jpg", b"a%20b.jpg",          # space, plus, percent (URL encoding traps)
    b"q?x=1#f.jpg", b"q%3Fx=1%23f.jpg",            # query and fragment characters
    b"...", b". .", b"..jpg", b"...jpg/....",      # names of dots
    b"%2e%2e/x.jpg", b"%2E%2E/x.jpg",              # a name that percent-decodes to ..
    b"Case.JPG", b"case.jpg",                      # case twins
    # 240 bytes: a long name. Not 255, the longest ext4 allows: with versioning on (which
    # this suite needs to count replaced objects) SeaweedFS 4.48 keeps an object's versions
    # in a directory named NAME.versions, which its filer refuses past 255 bytes, so the
    # PutObject of a 247-255-byte name fails with 500 there and nowhere else (checked with
    # aws s3api put-object: without versioning, 255 bytes are stored).
    b"L" * 236 + b".jpg",
    b"d" * 200 + b"/" + b"e" * 200 + b"/" + "é".encode() * 100 + b".jpg",  # a long path
    b"emoji-\xf0\x9f\x93\xb7.jpg", b"ctrl-\x01\x7f.jpg",
]


def hostile_names(ctx: Context) -> None:
    root = os.path.join(ctx.dir, "card")
    os.makedirs(root)
    for name in HOSTILE_NAMES:
        F.write_file(root, name, ctx.rng.randbytes(ctx.rng.randint(100, 5000)), CARD_MTIME)
    ctx.expect(root)
    state = ctx.state()
    run = ctx.run(root, state)
    if run.status not in (0, 1):
        ctx.row.notes.append(f"first run: status {run.status}: {tail(run.stderr)}")
    ctx.finish(root, state, resume_first=False)


def scene_file(kind: str):
    """A hostile ingest-scene.toml: a clear message, exit 65, nothing uploaded, no hang."""
    def scenario(ctx: Context) -> None:
        card = ctx.card("card", [("DCIM/100MEDIA/DJI_0001.JPG", 40000)])
        target = os.path.join(card, "ingest-scene.toml")
        if kind == "symlink-dev-zero":
            os.symlink("/dev/zero", target)
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "symlink-host-file":
            # A host file that parses: followed, it would label the card (and upload it).
            host = os.path.join(ctx.dir, "host-file.toml")
            with open(host, "w") as out:
                out.write('scene = "read-from-the-host"\n')
            os.symlink(host, target)
        elif kind == "65KiB":
            with open(target, "w") as out:
                out.write('scene = "big"\n' + ("# padding padding padding padding padding padding padding\n" * 1200))
        elif kind == "tags-device":
            with open(target, "w") as out:
                out.write('scene = "s"\n[tags]\ndevice = "x"\n')
        elif kind == "nul-in-value":
            with open(target, "wb") as out:
                out.write(b'scene = "a\x00b"\n')
        state = ctx.state()
        ctx.expect_empty = True
        ctx.known = F.card_files(card, skip=())
        run = ctx.run(card, state, timeout=10)
        ok_status = run.status == 65
        ok_message = "ingest-scene.toml" in run.stderr
        if not ok_status or not ok_message:
            ctx.row.checks_failed.append(
                f"exit {run.status}{' (timed out)' if run.timed_out else ''}, documented 65 with a message naming "
                f"ingest-scene.toml; said: {tail(run.stderr) or '(nothing)'}")
        else:
            ctx.row.notes.append(f"exit 65: {tail(run.stderr, 160)}")
        ctx.faults += 1
        # Nothing of this card may be in the bucket (expect_empty): any object is a failed check.
    return scenario


def udev_properties(device: str) -> dict[str, str]:
    text = subprocess.run(["udevadm", "info", "--query=property", f"--name={device}"], capture_output=True,
                          text=True).stdout
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def expect_status(ctx: Context, run: F.Run, what: str, status: int, words: list[str]) -> None:
    """A refusal: exit `status` and a message holding every one of `words`."""
    missing = [word for word in words if word not in run.stderr]
    if run.status != status or missing:
        ctx.row.checks_failed.append(
            f"{what}: exit {run.status}{' (timed out)' if run.timed_out else ''}, documented {status} with a message "
            f"naming {', '.join(words)}; said: {tail(run.stderr) or '(nothing)'}")
    else:
        ctx.row.notes.append(f"exit {status}: {tail(run.stderr, 200)}")


def refused_file_system(fs: str):
    """A card in a USB reader whose file system is not on the allow-list ([device] file_systems,
    default vfat, exfat and ext4), given to `ingest --device` as its udev trigger does: refused
    before the kernel parses it (no mount(2) at all, under strace), exit 66 with a message naming
    the type and the setting, nothing uploaded."""
    def scenario(ctx: Context) -> None:
        loop = F.LoopCard(os.path.join(ctx.dir, F.UsbCardRule.image_name(f"{fs}-{ctx.device_id}")),
                          os.path.join(ctx.dir, "mnt"), 16, "OLDCARD", fs=fs)
        ctx.card("card", [(f"DCIM/100MEDIA/DJI_{i:04d}.JPG", 30000 + i) for i in range(1, 4)], root=loop.mountpoint)
        ctx.known = F.card_files(loop.mountpoint)
        ctx.expect_empty = True
        subprocess.run(["umount", loop.mountpoint], check=True)
        udev = udev_properties(loop.device)
        if udev.get("ID_FS_TYPE") != fs or udev.get("ID_BUS") != "usb":
            ctx.row.notes.append(f"udev describes {loop.device} as ID_FS_TYPE={udev.get('ID_FS_TYPE')} "
                                 f"ID_BUS={udev.get('ID_BUS')}, not a {fs} card in a USB reader")
        trace = os.path.join(ctx.dir, "strace.out")
        run = ctx.run(None, ctx.state(), device=loop.device, timeout=30, env={"RUNTIME_DIRECTORY": ctx.state("run")},
                      wrapper=["strace", "-f", "-qq", "-e", "trace=mount,fsopen", "-o", trace])
        ctx.faults += 1
        expect_status(ctx, run, f"a {fs} card", 66, [fs, "file_systems"])
        with open(trace, errors="replace") as lines:
            mounts = [line.strip() for line in lines if re.search(r"\b(mount|fsopen)\(", line)]
        if mounts:
            ctx.row.checks_failed.append(f"the kernel was asked to mount the {fs} card: {mounts[0][:200]}")
        if F.mounts_of(*loop.rdev):
            ctx.row.checks_failed.append(f"the {fs} card is mounted at {F.mounts_of(*loop.rdev)}")
        loop.release()
    return scenario


def station_uuid_rescan(ctx: Context) -> None:
    """The station's own disk (an ext4 image mounted at a system place, holding "secrets") and a
    card in a USB reader carrying the same file-system UUID: the card is ingested once by
    `--device`, then taken out; `ingest rescan` must not take the station's disk for the known
    card, neither where it is nor once it is also mounted at a place for removable media (the
    runtime directory): a device with any system mount is the system's. Both rescans end 0."""
    shared_uuid = str(uuid.uuid4())
    station = F.LoopCard(os.path.join(ctx.dir, "station-disk.img"), os.path.join(ctx.dir, "sys-mount"), 16,
                         "STATION", uuid=shared_uuid)
    ctx.card("station", [("etc/shadow", 1500), ("etc/ingest/credentials", 300), ("srv/data.bin", 70000)],
             root=station.mountpoint)
    ctx.forbidden = F.card_files(station.mountpoint)
    card = F.LoopCard(os.path.join(ctx.dir, F.UsbCardRule.image_name(f"clone-{ctx.device_id}")),
                      os.path.join(ctx.dir, "mnt"), 16, "CLONECARD", uuid=shared_uuid)
    ctx.card("card", [(f"DCIM/100MEDIA/DJI_{i:04d}.JPG", 40000 + i) for i in range(1, 4)], root=card.mountpoint)
    ctx.expect(card.mountpoint)
    subprocess.run(["umount", card.mountpoint], check=True)
    state, runtime = ctx.state(), ctx.state("run")
    env = {"RUNTIME_DIRECTORY": runtime}
    first = ctx.run(None, state, device=card.device, env=env, timeout=120)
    if first.status != 0:
        ctx.row.checks_failed.append(f"the card itself: exit {first.status}: {tail(first.stderr)}")
    rescan = ["rescan", "--endpoint", ctx.h.proxy.endpoint, "--bucket", BUCKET, "--state-dir", state,
              "--config", ctx.config, "--json"]

    def rescanned(where: str) -> list[str]:
        run = ctx.command(rescan, env=env, timeout=120)
        if run.status != 0:
            ctx.row.checks_failed.append(f"rescan with {where}: exit {run.status}, documented 0 (nothing pending): "
                                         f"{tail(run.stderr)}")
        return [e.get("path") for e in run.events if e.get("event") == "rescan_card"]

    # The control: the card itself, mounted where removable media go, is found by its UUID.
    in_reader = os.path.join(runtime, os.path.basename(card.device))
    os.makedirs(in_reader)
    subprocess.run(["mount", "-o", "ro", card.device, in_reader], check=True)
    taken = rescanned("the card mounted under the runtime directory")
    subprocess.run(["umount", in_reader], check=True)
    if taken != [in_reader]:
        ctx.row.checks_failed.append(f"rescan with the card mounted at {in_reader} took {taken}: the control failed")
    card.release()  # taken out of the reader
    ctx.faults += 1
    taken = rescanned("the station's disk at its system place")
    if taken:
        ctx.row.checks_failed.append(f"rescan took {taken} for the card: the station's disk at its system place")
    # The station's disk seen also at a place for removable media: still the system's.
    second = os.path.join(runtime, os.path.basename(station.device))
    os.makedirs(second, exist_ok=True)
    subprocess.run(["mount", "--bind", "-o", "ro", station.mountpoint, second], check=True)
    try:
        taken = rescanned("the station's disk also under the runtime directory")
        if taken:
            ctx.row.checks_failed.append(f"rescan took {taken} for the card: the station's disk, mounted also under "
                                         f"the runtime directory")
    finally:
        subprocess.run(["umount", second], check=False)
    station.release()


# The card's dates, and the {date} each key must carry: ext4 (256-byte inodes) keeps times from
# 1901-12-13 to 2446; past 2262-04-11 the nanoseconds since 1970 no longer fit 64 bits, and the
# documented outcome is that limit (man/ingest.1), never a crash.
DATED_FILES: list[tuple[str, int, str]] = [
    ("DCIM/FAR_2300.JPG", 10_413_792_000, "2262-04-11"),  # 2300-01-01 00:00 UTC
    ("DCIM/OLD_1901.JPG", -2_147_472_000, "1901-12-14"),  # 1901-12-14 00:00 UTC
    ("DCIM/EVE_1969.JPG", -1, "1969-12-31"),              # 1969-12-31 23:59:59 UTC
    ("DCIM/EPOCH_1970.JPG", 0, "1970-01-01"),
]


def ext4_card(ctx: Context, tag: str, label: str) -> F.LoopCard:
    """An ext4 card in a USB reader with 4 KiB blocks (files up to 16 TiB) and 256-byte inodes
    (dates from 1901 to 2446), as mkfs.ext4 makes a large card."""
    return F.LoopCard(os.path.join(ctx.dir, F.UsbCardRule.image_name(f"{tag}-{ctx.device_id}")),
                      os.path.join(ctx.dir, "mnt"), 32, label, mkfs_args=("-b", "4096", "-I", "256"))


def far_dates(ctx: Context) -> None:
    """An ext4 card with files dated 2300, 1901, the last second of 1969 and the epoch: no
    crash, every file lands byte for byte, each key's {date} is the documented one."""
    loop = ext4_card(ctx, "time", "TIMECARD")
    ctx.configure("s3", 'key_template = "{device}/{date}/{label}-{card_id}/{path}"')
    for relative, mtime, _ in DATED_FILES:
        F.write_file(loop.mountpoint, relative, ctx.rng.randbytes(ctx.rng.randint(1000, 90000)), mtime)
    loop.remount_ro()
    for relative, mtime, _ in DATED_FILES:
        if os.stat(os.path.join(loop.mountpoint, relative)).st_mtime != mtime:
            ctx.row.notes.append(f"ext4 did not keep {relative}'s date {mtime}")
    ctx.expect(loop.mountpoint)
    ctx.faults += len(DATED_FILES)
    ctx.finish(loop.mountpoint, ctx.state(), resume_first=False, attempts=2)
    keys = [item["Key"] for page in ctx.h.client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=ctx.device_id + "/") for item in page.get("Contents", [])]
    for relative, _, day in DATED_FILES:
        found = [key for key in keys if key.endswith(relative)]
        if found and f"/{day}/" not in found[0]:
            ctx.row.checks_failed.append(f"{relative}: key {found[0]!r}, documented date {day}")
        elif found and relative == DATED_FILES[0][0]:
            ctx.row.notes.append(f"2300-01-01 lands as {found[0]!r}")
    loop.release()


def giant_sparse(ctx: Context) -> None:
    """An ext4 card with a sparse file as large as ext4 allows (16 TiB less a block), between
    two photos: it cannot be staged. No crash, no staging disk filled (the space check comes
    before a byte is copied), a message naming the staging area, and the photos land."""
    loop = ext4_card(ctx, "giant", "GIANTCARD")
    ctx.card("card", [("DCIM/100MEDIA/DJI_0001.JPG", 70000), ("DCIM/100MEDIA/DJI_0003.JPG", 80000)],
             root=loop.mountpoint)
    giant = os.path.join(loop.mountpoint, "DCIM/100MEDIA/DJI_0002.MP4")
    with open(giant, "wb") as out:
        for size in (16 * 2**40 - 4096, 2**40, 2**38):
            try:
                out.truncate(size)
                break
            except OSError:
                continue
    loop.remount_ro()
    giant_size = os.stat(giant).st_size
    ctx.files += F.card_files(loop.mountpoint, skip=(b"DCIM/100MEDIA/DJI_0002.MP4",))
    ctx.history = "if-present"  # a card with a file it cannot take is never all verified: no generation
    ctx.faults += 1
    state = ctx.state()
    run = ctx.run(loop.mountpoint, state, timeout=120)
    ctx.row.notes.append(f"a {giant_size / 2**40:.1f} TiB file: exit {run.status}: {tail(run.stderr, 240)}")
    if run.status not in (0, 1, 73) or (run.status == 73 and "staging area" not in run.stderr):
        ctx.row.checks_failed.append(f"exit {run.status}, documented 1 (the file refused) or 73 (staging full, "
                                     f"named): {tail(run.stderr)}")
    staged = subprocess.run(["du", "-sk", state], capture_output=True, text=True).stdout.split()[0]
    if int(staged) > 64 * 1024:
        ctx.row.checks_failed.append(f"the state directory holds {staged} KiB after the giant")
    ctx.finish(loop.mountpoint, state, resume_first=False, attempts=2)
    loop.release()


def links_and_mounts(same_file_system: bool):
    """A card (a directory) holding a symlink to a host directory and one to a host file, and a
    directory where the host's other file system (a tmpfs) is bind-mounted, or with
    `same_file_system`, a host directory of the card's own file system: nothing from outside the
    card may land (every host file's bytes are looked for in the bucket), the skips are reported."""
    def scenario(ctx: Context) -> None:
        host = ctx.card("host", [("secret.txt", 5000), ("keys/station.key", 3000)])
        card = ctx.card("card", [(f"DCIM/100MEDIA/DJI_{i:04d}.JPG", 20000 + i) for i in range(1, 5)])
        ctx.expect(card)  # before the links and mounts: the card's own files
        os.symlink(host, os.path.join(card, "DCIM/LINKED"))
        os.symlink(os.path.join(host, "secret.txt"), os.path.join(card, "DCIM/100MEDIA/DJI_9999.JPG"))
        inside = os.path.join(card, "MOUNTED")
        os.makedirs(inside)
        if same_file_system:
            source = host
        else:
            tmpfs = F.Tmpfs(os.path.join(ctx.dir, "hostfs"), "4m")
            ctx.audit_hook = tmpfs.release
            source = tmpfs.mountpoint
            F.write_file(source, "tmpfs-secret.txt", ctx.rng.randbytes(4000))
        subprocess.run(["mount", "--bind", source, inside], check=True)
        def unmount() -> None:
            subprocess.run(["umount", "-l", inside], check=False)

        F.CLEANUP.push("bind mount", unmount)
        ctx.forbidden = F.card_files(host) + ([] if same_file_system else F.card_files(source))
        ctx.faults += 3
        state = ctx.state()
        try:
            run = ctx.run(card, state, timeout=60)
            skipped = {e.get("path"): e.get("reason") for e in run.events if e.get("event") == "skipped"}
            failed = {e.get("path"): e.get("reason") for e in run.events if e.get("event") == "failed"}
            for path in ("DCIM/LINKED", "DCIM/100MEDIA/DJI_9999.JPG", "MOUNTED"):
                if path not in skipped and not any(f.startswith(path + "/") for f in failed):
                    ctx.row.checks_failed.append(f"{path} not reported as skipped (skips: {skipped}, failed: {failed})")
            ctx.row.notes.append(f"first run exit {run.status}; skipped {skipped}" + (f"; failed {failed}" if failed else ""))
            ctx.finish(card, state, resume_first=False, attempts=2, timeout=60)
        finally:
            unmount()
            F.CLEANUP.remove(unmount)
    return scenario


ESCAPE_NAMES: list[bytes] = [b"DCIM/title\x1b]0;pwned\x07.jpg", b"DCIM/clear\x1b[2J.jpg", b"DIR\x1b[31mred/inside.jpg"]


def console_escapes(ctx: Context) -> None:
    """Names holding terminal escape sequences (set the window title, clear the screen, red),
    as files, a symlink and a FIFO (which are skipped and so named on the console): the console
    output of an ingest (not --json, log level debug), `ingest scan --list` and `ingest ls` holds
    no raw ESC or BEL byte, and the files land."""
    card = os.path.join(ctx.dir, "card")
    for name in ESCAPE_NAMES:
        F.write_file(card, name, ctx.rng.randbytes(ctx.rng.randint(100, 5000)), CARD_MTIME)
    ctx.expect(card)
    os.symlink("nowhere", os.path.join(os.fsencode(card), b"link\x1b]0;pwned\x07"))
    os.mkfifo(os.path.join(os.fsencode(card), b"fifo\x1b[2J"))
    state = ctx.state()
    ctx.faults += len(ESCAPE_NAMES) + 2
    runs = {"ingest": ctx.run(card, state, json=False, timeout=60, env={"INGEST_LOG_LEVEL": "debug"})}
    # Its own state directory, which knows no file yet: --list names every one.
    runs["scan --list"] = ctx.command(["scan", card, "--list", "--config", ctx.config, "--state-dir",
                                       ctx.state("scan-state")], timeout=30)
    runs["ls"] = ctx.command(["ls", "--endpoint", ctx.h.proxy.endpoint, "--bucket", BUCKET, "--config", ctx.config,
                              ctx.device_id + "/"], timeout=30)
    for what, run in runs.items():
        for byte, name in ((b"\x1b", "ESC"), (b"\x07", "BEL")):
            at = run.output.find(byte)
            if at >= 0:
                ctx.row.checks_failed.append(f"{what}: a raw {name} on the console: {run.output[max(0, at - 40):at + 20]!r}")
        if b"pwned" not in run.output or b"2J" not in run.output:
            ctx.row.checks_failed.append(f"{what} did not show the names (exit {run.status}): nothing was checked")
    ctx.finish(card, state, resume_first=False, attempts=2)


# ---------------------------------------------------------------------------
# tus: the same binary against a tus 1.0 server (scripts/tus_server.py), its fault proxy between


TUS_CHUNK = 16 * MiB  # [tus] chunk_size's default: one chunk is one part, one PATCH
HEADS_SLACK = MiB  # the requests' heads (HEAD, OPTIONS, POST, PATCH) in a bound on bytes sent


class TusContext(Context):
    """A repetition of a tus row: the card goes to the tus server, through its own fault proxy
    (`self.proxy`), configured by a [tus] section (url; stall_timeout left at its 30 s: the
    server holds an upload's lock while it still reads a PATCH that broke, for up to 30 s).
    Counted by the server's stored bytes (F.audit_tus), never by the journal; the proxy's
    counters are taken at each fault (`take_stats`) so that a row can bound the bytes sent
    after it."""

    orphans_allowed = False  # unfinished uploads counted as notes (a creation's answer lost), not as open

    def __init__(self, harness: Harness, row: Row, rep: int, config_extra: str = "") -> None:
        super().__init__(harness, row, rep, config_extra)
        self.tus, self.proxy = harness.tus()
        self.proxy.rules([])
        self.proxy.reset()
        self.history = "off"
        self.prefix = self.device_id + "/"
        self.sent = 0  # bytes_to_upstream of the counters taken so far
        self.resent = 0  # bytes sent after faults beyond what the server lacked at them
        with open(self.config, "w") as out:
            out.write(f"""[device]
id = "{self.device_id}"

[upload]

[staging]
reserve = "1MiB"

[tus]
url = "{self.proxy.endpoint}/files/"
connect_timeout = "3s"
{config_extra}""")

    def run(self, card: str | None, state: str, *, resume: bool = False, timeout: float = 180,
            device: str | None = None, json: bool = True, options: list[str] = (), **kw) -> F.Run:
        args = ["resume"] if resume else [card]
        args += ["--state-dir", state, "--config", self.config]
        return self.command(args + list(options) + (["--json"] if json else []), timeout=timeout, **kw)

    def command(self, args: list[str], timeout: float = 180, **kw) -> F.Run:
        """Context.command, the run's output (JSON events and log, info level) kept in
        run-N.log of the repetition's directory for a look (--keep)."""
        self.logs = getattr(self, "logs", 0) + 1
        run = super().command(args, timeout=timeout, env={"INGEST_LOG_LEVEL": os.environ.get("FAULTS_TUS_LOG_LEVEL", "info"), **kw.pop("env", {})}, **kw)
        with open(os.path.join(self.dir, f"run-{self.logs}.log"), "wb") as out:
            out.write(b"$ ingest " + " ".join(args).encode() + b"\n" + run.output)
        return run

    def card_bytes(self) -> int:
        """One copy of each distinct content of the card: ingest dedupes by content per
        destination, so a copy of a file already sent is not sent again."""
        return sum({f.xxh128: f.size for f in self.files}.values())

    def lacking(self) -> int:
        """The card's bytes the server does not hold, once its offsets have settled."""
        return max(0, self.card_bytes() - self.tus.settled_offset(self.prefix))

    def take_stats(self) -> int:
        """The proxy's bytes_to_upstream since the last call (its faults counted), then zeroed."""
        stats = self.proxy.stats()
        self.proxy.reset()
        self.faults += sum(stats["injected"].values())
        self.sent += stats["bytes_to_upstream"]
        return stats["bytes_to_upstream"]

    def bound_after_fault(self, sent: int, lacking: int, what: str, chunks: int = 1, chunk: int = TUS_CHUNK) -> None:
        """Bytes sent after a fault: at most what the server lacked at it, `chunks` chunks (in
        flight when it hit) and the requests' heads."""
        self.resent += max(0, sent - lacking)
        limit = lacking + chunks * chunk + HEADS_SLACK
        if sent > limit:
            self.row.checks_failed.append(f"{what}: {sent / MiB:.1f} MiB sent, the server lacked {lacking / MiB:.1f} MiB "
                                          f"(bound {limit / MiB:.1f} MiB)")

    def audit(self) -> F.Count:
        count = F.audit_tus(self.tus, self.prefix, self.files, self.orphans_allowed)
        self.take_stats()
        count.sent_bytes = self.sent
        self.row.resent += self.resent
        self.row.faults += self.faults
        self.row.add(count)
        return count


def tus_upload_offset(ctx: TusContext, suffix: str) -> int:
    """How far the server has the upload of the key ending in `suffix`: its .info offset, or the
    bytes its data file holds (written while a PATCH is read), the larger."""
    best = 0
    for info in ctx.tus.uploads(ctx.prefix):
        if info["key"].endswith(suffix):
            try:
                on_disk = os.path.getsize(info["path"])
            except OSError:
                on_disk = 0
            best = max(best, int(info.get("offset") or 0), on_disk)
    return best


def tus_kill_at(percent: int, size: int = 300 * MiB, rate: int = 64 * MiB):
    """A `size` file and four photos, sent at `rate` (--max-rate) with the default 16 MiB chunk;
    SIGKILL once the server holds `percent` % of the large file (its .info offset, polled);
    then `ingest resume` must send no more than the server lacked (its offsets, settled, at the
    kill) plus one chunk and the heads, and exit 0; then the card again: exit 0, nothing sent."""
    def scenario(ctx: TusContext) -> None:
        spec = [("DCIM/100MEDIA/DJI_0001.MP4", size)]
        spec += [(f"DCIM/100MEDIA/DJI_{i:04d}.JPG", ctx.rng.randint(64 * 1024, MiB)) for i in range(2, 6)]
        card = ctx.card("card", spec)
        ctx.expect(card)
        state = ctx.state()
        target = size * percent // 100

        def watch(kill, ended: threading.Event) -> None:
            while not ended.is_set():
                if tus_upload_offset(ctx, "/DJI_0001.MP4") >= target:
                    kill()
                    return
                ended.wait(0.01)

        run = ctx.run(card, state, options=["--max-rate", f"{rate // MiB}MiB/s"], watch=watch, timeout=size / rate * 3 + 60)
        if not run.killed:
            ctx.row.checks_failed.append(f"the run ended (status {run.status}) before the server held {percent} %")
            return
        lacking = ctx.lacking()  # once the server's offsets have settled
        held = tus_upload_offset(ctx, "/DJI_0001.MP4")
        ctx.take_stats()
        ctx.row.notes.append(f"killed at {held * 100 / size:.0f} % ({held / MiB:.1f} MiB on the server, "
                             f"{lacking / MiB:.1f} MiB of the card lacking)")
        resume = ctx.run(None, state, resume=True, timeout=size / MiB + 120)
        sent = ctx.take_stats()
        ctx.bound_after_fault(sent, lacking, "ingest resume after the kill")
        ctx.row.notes.append(f"ingest resume sent {sent / MiB:.2f} MiB for {lacking / MiB:.2f} MiB lacking "
                             f"(bound {(lacking + TUS_CHUNK + HEADS_SLACK) / MiB:.2f})")
        if resume.status != 0:
            ctx.row.checks_failed.append(f"ingest resume: exit {resume.status}: {tail(resume.stderr)}")
        again = ctx.run(card, state, timeout=120)
        sent_again = ctx.take_stats()
        if again.status != 0:
            ctx.row.checks_failed.append(f"the card again: exit {again.status}: {tail(again.stderr)}")
            ctx.finish(card, state, resume_first=False)
        elif sent_again > HEADS_SLACK or again.count("uploaded"):
            ctx.row.checks_failed.append(f"the card again sent {sent_again} bytes, {again.count('uploaded')} upload(s): "
                                         f"nothing was left to send")
    scenario.context = TusContext
    return scenario


class TusPowerCuts(PowerCuts):
    """PowerCuts for a tus row: at each cut the server's offsets (settled) say what it lacks; the
    bytes sent from one cut to the next (and to the end) must be at most what it lacked at the
    first of them plus one chunk and the heads. The journal may be behind the server after a
    cut: the upload's HEAD decides where to go on."""

    def __init__(self, ctx: TusContext, size_mib: int) -> None:
        super().__init__(ctx, size_mib)
        self.lacking = [ctx.card_bytes()]  # before any cut: everything

    def power_back(self) -> None:
        ctx = self.ctx
        lacking = ctx.lacking()
        sent = ctx.take_stats()
        ctx.bound_after_fault(sent, self.lacking[-1], f"the run before cut {self.fs.cuts}")
        self.lacking.append(lacking)
        self.unacknowledged.append(lacking)
        self.fs.remount()
        check_journal(ctx, self.state)

    def finish(self, card: str) -> None:
        ctx = self.ctx
        last = ctx.finish(card, self.state, resume_first=False)
        if last.status != 0:
            ctx.row.checks_failed.append(f"the card after {self.fs.cuts} power cut(s): last exit {last.status}: "
                                         f"{tail(last.stderr)}")
        resume = ctx.run(None, self.state, resume=True)
        if resume.status != 0:
            ctx.row.checks_failed.append(f"resume after the power cuts: exit {resume.status}: {tail(resume.stderr)}")
        sent = ctx.take_stats()
        ctx.bound_after_fault(sent, self.lacking[-1], f"the runs after cut {self.fs.cuts}")
        check_journal(ctx, self.state)
        if self.fs.kept:
            ctx.row.notes.append(f"{self.fs.kept} of {self.fs.cuts} cut(s) kept a write that was not synced")
            if self.fs.kept == self.fs.cuts:
                ctx.row.checks_failed.append("no power cut lost a write that was not synced: nothing was tested")
        at_cuts = ", ".join(f"{b / MiB:.1f}" for b in self.lacking[1:]) or "-"
        ctx.row.notes.append(f"{self.fs.cuts} cut(s); the server lacked {at_cuts} MiB of {ctx.card_bytes() / MiB:.1f} "
                             f"at them; sent beyond that: {ctx.resent / MiB:.1f} MiB")


def tus_power_cut(size: int = 200 * MiB, rate: int = 32 * MiB, cuts: int = 2):
    """A `size` file and two photos sent at `rate`; the power cut (the state directory's file
    system shut down, ingest killed, the image mounted again) in the middle of the upload,
    once the first chunk could be done, at 20 to 70 % of the time what is left would take,
    `cuts` times, each run taking up what the last left; then the card to the end."""
    def scenario(ctx: TusContext) -> None:
        card = ctx.card("card", [("DCIM/100MEDIA/DJI_0001.MP4", size), ("DCIM/100MEDIA/DJI_0002.JPG", 300 * 1024),
                                 ("DCIM/100MEDIA/DJI_0003.JPG", 700 * 1024 + 3)])
        ctx.expect(card)
        with TusPowerCuts(ctx, 2 * size // MiB + 512) as power:
            for _ in range(cuts):
                left = power.lacking[-1] / rate
                run = power.run(card, options=["--max-rate", f"{rate // MiB}MiB/s"], timeout=left * 2 + 120,
                                kill_after=TUS_CHUNK / rate + ctx.rng.uniform(0.2, 0.7) * left)
                if not run.killed:
                    ctx.row.notes.append(f"a run ended (status {run.status}) before its power cut")
            power.finish(card)
    scenario.context = TusContext
    return scenario


def tus_proxy_faults(rules: list[str], chunk: int = 5 * MiB):
    """The mixed card (three files of 3 and 4 chunks of 5 MiB, photos, an empty file, a copy)
    through the proxy's `rules` (resets mid-PATCH and of a creation, a stall); the first run,
    then resume and the card until exit 0; every file whole once (an upload a cut creation
    left unfinished is a note: orphans expire on the server), and all bytes sent at most the
    card's plus one chunk per fault and the heads."""
    def scenario(ctx: TusContext) -> None:
        ctx.orphans_allowed = True
        ctx.configure("tus", f'chunk_size = "{chunk // MiB}MiB"')
        card = ctx.mixed_card()
        ctx.expect(card)
        state = ctx.state()
        ctx.proxy.rules(rules)
        run = ctx.run(card, state, timeout=300)
        ctx.proxy.rules([])
        if run.status != 0:
            ctx.row.notes.append(f"first run: status {run.status}: {tail(run.stderr, 200)}")
            ctx.finish(card, state)
        stats = ctx.proxy.stats()
        injected = sum(stats["injected"].values())
        sent = ctx.take_stats()
        if not injected:
            ctx.row.checks_failed.append("the proxy injected no fault: nothing was tested")
        limit = ctx.card_bytes() + injected * chunk + HEADS_SLACK
        ctx.resent += max(0, sent - ctx.card_bytes())
        ctx.row.notes.append(f"{injected} fault(s) injected ({', '.join(f'{k} {v}' for k, v in stats['injected'].items() if v)}); "
                             f"{sent / MiB:.1f} MiB sent for {ctx.card_bytes() / MiB:.1f} MiB")
        if sent > limit:
            ctx.row.checks_failed.append(f"{sent / MiB:.1f} MiB sent: more than the card's {ctx.card_bytes() / MiB:.1f} MiB "
                                         f"plus a chunk per fault (bound {limit / MiB:.1f} MiB)")
    scenario.context = TusContext
    return scenario


# name, function, repetitions (full), in the short form?
# ---------------------------------------------------------------------------
# The fleet (issue 41): stations sharing one bucket of a SeaweedFS cluster through two gateways

FLEET_BUCKET = "fleet"
FLEET_TEMPLATE = "{label}-{card_id}/{path}"  # the fleet key template: no {device}, no {card_date}
FLEET_ADOPT_AFTER = "10s"  # [upload] adopt_after: a stopped station's upload is taken over 10 s after its last part
FLEET_PART = 8 * MiB  # [upload] part_size of the stations
FLEET_BIG = 600 * MiB  # the card's clip
FLEET_RATE = 64 * MiB  # --max-rate of the runs that are killed or faulted mid-run
FLEET_STATIONS = ("station-a", "station-b", "station-c")


def fleet_cluster(harness: Harness) -> F.Cluster:
    """The fleet's cluster (F.Cluster: master, three volume servers in three racks, filer, two
    gateways) and its versioned bucket, started by the first fleet row; its conditional writes
    must hold across the gateways, or the fleet rows mean nothing."""
    if getattr(harness, "cluster", None) is None:
        cluster = F.Cluster(harness.venv, os.path.join(harness.work, "cluster"), *harness.admin)
        cluster.start()
        harness.cluster = cluster
        client = cluster.client(0)
        client.create_bucket(Bucket=FLEET_BUCKET)
        client.put_bucket_versioning(Bucket=FLEET_BUCKET, VersioningConfiguration={"Status": "Enabled"})
        harness.fleet_versioned = client.get_bucket_versioning(Bucket=FLEET_BUCKET).get("Status") == "Enabled"
        if not cluster.conditional_writes_hold(FLEET_BUCKET):
            raise RuntimeError("the cluster's gateways do not hold a conditional write across each other "
                               "(If-None-Match: * through gateway 2 of a key gateway 1 wrote was not refused 412)")
        F.log(f"cluster in {cluster.directory}: gateways {', '.join(cluster.endpoints)}; conditional writes "
              f"hold across them")
    return harness.cluster


class FleetContext(Context):
    """A repetition of a fleet row: stations A, B and C (state directories of their own, and
    configurations that differ only in [device] id) on the fleet key template, sending to the
    cluster's two gateways through a counting fault proxy each (`proxies[i]` in front of gateway
    i: the bytes each station sent). The card's label is this repetition's own, so the card's
    folder (`{label}-{card_id}/`) is too; counted by downloading it, as every row."""

    def __init__(self, harness: Harness, row: Row, rep: int, config_extra: str = "") -> None:
        super().__init__(harness, row, rep, config_extra)
        self.cluster = fleet_cluster(harness)
        self.client = self.cluster.client(0)  # made once: a botocore client takes a while to make
        self.label = f"FL{os.path.basename(self.dir).split('-')[0]}{secrets.token_hex(2).upper()}"  # ext4: 16 at most
        self.prefix = self.label + "-"
        self.history = "if-present"
        self.proxies = [F.Proxy(harness.venv, port, harness.seed, os.path.join(self.dir, f"proxy-{index + 1}.log"))
                        for index, port in enumerate(self.cluster.gateway_ports)]
        self.sent = [0, 0]  # bytes_to_upstream of each proxy, taken so far (take_sent)
        self.configs: dict[str, str] = {}
        for station in FLEET_STATIONS:
            path = os.path.join(self.dir, f"{station}.toml")
            with open(path, "w") as out:
                out.write(f"""[device]
id = "{station}"

[s3]
key_template = "{FLEET_TEMPLATE}"
connect_timeout = "3s"
stall_timeout = "5s"

[upload]
part_size = "{FLEET_PART // MiB}MiB"
single_put_threshold = "5MiB"
adopt_after = "{FLEET_ADOPT_AFTER}"

[staging]
reserve = "1MiB"
{config_extra}""")
            self.configs[station] = path

    def station(self, station: str, card: str, gateways: list[int], *, rate: int | None = None,
                timeout: float = 240, **kw) -> F.Run:
        """`ingest CARD` as `station` (its state directory, configuration and runtime directory:
        stations are machines of their own), given the proxies of `gateways` as its endpoints,
        in that order."""
        state = self.state(f"state-{station[-1]}")
        args = [card]
        for index in gateways:
            args += ["--endpoint", self.proxies[index].endpoint]
        args += ["--bucket", FLEET_BUCKET, "--state-dir", state, "--config", self.configs[station], "--json"]
        if rate:
            args += ["--max-rate", f"{rate // MiB}MiB/s"]
        env = {"RUNTIME_DIRECTORY": self.state(f"run-{station[-1]}"), "INGEST_LOG_LEVEL": "info", **kw.pop("env", {})}
        self.logs = getattr(self, "logs", 0) + 1
        run = self.command(args, timeout=timeout, env=env, **kw)
        with open(os.path.join(self.dir, f"run-{self.logs}-{station}.log"), "wb") as out:
            out.write(b"$ ingest " + " ".join(args).encode() + b"\n" + run.output)
        return run

    def take_sent(self, index: int) -> int:
        """Proxy `index`'s bytes_to_upstream since the last call, then zeroed."""
        proxy = self.proxies[index]
        if proxy.process.poll() is not None:
            return 0
        stats = proxy.stats()
        proxy.reset()
        self.faults += sum(stats["injected"].values())
        self.sent[index] += stats["bytes_to_upstream"]
        return stats["bytes_to_upstream"]

    def fleet_card(self, name: str = "card", clones: int = 1, big: int = FLEET_BIG) -> list[F.LoopCard]:
        """An ext4 card (a loop device, mounted read-only): a clip of `big` bytes and ten photos,
        and `clones` - 1 clones of it (copies of its image: the same file system UUID and
        label, so the same card to ingest); its files expected in the bucket once."""
        loop = F.LoopCard(os.path.join(self.dir, f"{name}.img"), os.path.join(self.dir, f"mnt-{name}"),
                          big // MiB + 64, self.label)
        root = loop.mountpoint
        F.write_file(root, "DCIM/100MEDIA/DJI_0001.MP4", fleet_clip(self, big), CARD_MTIME)
        for index in range(2, 12):
            F.write_file(root, f"DCIM/100MEDIA/DJI_{index:04d}.JPG", random_bytes(self.rng, self.rng.randint(64 * 1024, MiB)),
                         CARD_MTIME)
        self.expect(root)
        loop.remount_ro()
        cards = [loop]
        for index in range(1, clones):
            cards.append(F.LoopCard.clone(loop, os.path.join(self.dir, f"{name}-{index}.img"),
                                          os.path.join(self.dir, f"mnt-{name}-{index}")))
        return cards

    def small_bytes(self) -> int:
        return sum(f.size for f in self.files if f.size < FLEET_BIG)

    def open_uploads(self) -> list[tuple[str, str]]:
        """(key, upload id) of the multipart uploads open under this card's folder."""
        answer = self.client.list_multipart_uploads(Bucket=FLEET_BUCKET, Prefix=self.prefix)
        return [(u["Key"], u["UploadId"]) for u in answer.get("Uploads", [])]

    def acknowledged(self, key: str, upload_id: str) -> int:
        """The bytes of the parts the server lists for an upload (ListParts)."""
        total = 0
        for page in self.client.get_paginator("list_parts").paginate(Bucket=FLEET_BUCKET, Key=key, UploadId=upload_id):
            total += sum(part["Size"] for part in page.get("Parts", []))
        return total

    def settled_acknowledged(self, quiet: float = 1.0, limit: float = 20.0) -> list[tuple[str, str, int]]:
        """(key, upload id, acknowledged bytes) of each open upload, once the sums have not
        changed for `quiet` seconds (a part the server was still reading when its sender died
        ends)."""
        deadline = time.monotonic() + limit
        last, since = None, time.monotonic()
        while True:
            now = [(key, upload_id, self.acknowledged(key, upload_id)) for key, upload_id in self.open_uploads()]
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet or time.monotonic() > deadline:
                return now
            time.sleep(0.25)

    def count_upload_calls(self, index: int, upload_ids: list[str]) -> None:
        """Proxy `index` counts (rules with count=0 match, never fire) the completes (POST) and
        aborts (DELETE) of these uploads: `upload_calls` reads them."""
        rules = []
        for upload_id in upload_ids:
            quoted = urllib.parse.quote(upload_id, safe="")
            rules += [f"delay:POST:uploadId={quoted}:count=0", f"delay:DELETE:uploadId={quoted}:count=0"]
        self.proxies[index].rules(rules)

    def upload_calls(self, indexes: list[int]) -> tuple[int, int]:
        """(completes, aborts) the proxies of `indexes` have counted (count_upload_calls)."""
        completes = aborts = 0
        for index in indexes:
            matched = self.proxies[index].matched()
            completes += sum(matched[0::2])
            aborts += sum(matched[1::2])
        return completes, aborts

    def audit(self) -> F.Count:
        count = F.audit_prefix(self.client, FLEET_BUCKET, self.prefix, self.files, self.dir,
                               self.h.fleet_versioned, history=self.history, ascmhl=self.h.ascmhl)
        for index in range(2):
            self.take_sent(index)
            self.proxies[index].stop()
        count.sent_bytes = sum(self.sent)
        self.row.faults += self.faults
        self.row.add(count)
        return count


def fleet_clip(ctx: FleetContext, size: int) -> bytes:
    """`size` random bytes, their first 16 this repetition's own: made once per harness (600 MiB
    take seconds to draw), and yet no repetition's clip is already in the bucket (ingest would
    copy it there instead of sending it)."""
    cached = getattr(ctx.h, "fleet_clip", None)
    if cached is None or len(cached) != size:
        cached = random_bytes(random.Random(f"{ctx.h.seed}/fleet-clip"), size)
        ctx.h.fleet_clip = cached
    return ctx.rng.randbytes(16) + cached[16:]


def kill_at_parts(ctx: FleetContext, percent: int, gateway: int = 0):
    """A run's watch: SIGKILL once proxy `gateway` has forwarded the photos and `percent` % of
    the clip (the only multipart file of a fleet card). Its counter, polled every 20 ms, is
    cheap and at once; polling ListParts (two requests to a busy gateway) overshot the kill
    point by far. What the
    server acknowledged is taken after the kill (settled_acknowledged): the parts in flight at
    the kill are not in it, unless their bodies had already left the sockets' buffers."""
    target = ctx.small_bytes() + FLEET_BIG * percent // 100

    def watch(kill, ended: threading.Event) -> None:
        while not ended.wait(0.02):
            if ctx.proxies[gateway].stats()["bytes_to_upstream"] >= target:
                kill()
                return
    return watch


def fleet_handover(percent: int):
    """Station A uploads the card through gateway 1 (--max-rate 64MiB/s) and is killed (SIGKILL)
    once `percent` % of the clip's parts are acknowledged; then station B runs the same card
    through gateway 2. B must send at most what A had not landed: the clip less the bytes of
    the parts the server lists for A's upload, two parts and the photos (and the requests'
    heads), complete A's upload (not abort it: the proxy counts B's completes and aborts of
    it) and exit 0."""
    def scenario(ctx: FleetContext) -> None:
        (card,) = ctx.fleet_card()
        a = ctx.station("station-a", card.mountpoint, [0], rate=FLEET_RATE, watch=kill_at_parts(ctx, percent))
        if not a.killed:
            ctx.row.checks_failed.append(f"station A ended (status {a.status}) before {percent} % of the clip's parts")
            return
        left = ctx.settled_acknowledged()
        acknowledged = sum(size for _, _, size in left)
        ctx.take_sent(0)
        ctx.row.notes.append(f"A killed at {acknowledged * 100 / FLEET_BIG:.0f} % of the clip "
                             f"({acknowledged / MiB:.0f} MiB in {len(left)} open upload(s)); A sent {ctx.sent[0] / MiB:.0f} MiB")
        ctx.count_upload_calls(1, [upload_id for _, upload_id, _ in left])
        ctx.proxies[1].reset()
        b = ctx.station("station-b", card.mountpoint, [1])
        sent = ctx.take_sent(1)
        bound = FLEET_BIG - acknowledged + 2 * FLEET_PART + ctx.small_bytes() + HEADS_SLACK
        completes, aborts = ctx.upload_calls([1])
        verdict = f"B sent {sent / MiB:.1f} MiB, bound {bound / MiB:.1f} MiB"
        ctx.row.notes.append(f"{verdict if sent <= bound else 'B'} completed A's upload {completes} time(s), "
                             f"aborted it {aborts} time(s)")
        if b.status != 0:
            ctx.row.checks_failed.append(f"station B: exit {b.status}: {tail(b.stderr)}")
        if sent > bound:
            ctx.row.checks_failed.append(verdict)
        if left and (not completes or aborts):
            ctx.row.checks_failed.append(f"A's upload was not completed by B (completes {completes}, aborts {aborts})")
        card.release()
    scenario.context = FleetContext
    return scenario


def fleet_clones(ctx: FleetContext) -> None:
    """Clones of one card on station A (gateway 1) and station B (gateway 2) at once, each at
    --max-rate 64MiB/s: both exit 0; the bytes each sent are reported (ideally about one card
    between them)."""
    a_card, b_card = ctx.fleet_card(clones=2)
    runs: dict[str, F.Run] = {}

    def one(station: str, card: F.LoopCard, gateway: int) -> None:
        runs[station] = ctx.station(station, card.mountpoint, [gateway], rate=FLEET_RATE)

    threads = [threading.Thread(target=one, args=("station-a", a_card, 0)),
               threading.Thread(target=one, args=("station-b", b_card, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    sent = [ctx.take_sent(0), ctx.take_sent(1)]
    card_bytes = sum({f.xxh128: f.size for f in ctx.files}.values())
    ctx.row.notes.append(f"A sent {sent[0] / MiB:.1f} MiB, B {sent[1] / MiB:.1f} MiB: {sum(sent) / card_bytes:.2f} x "
                         f"the card ({card_bytes / MiB:.0f} MiB)")
    for station, run in sorted(runs.items()):
        if run.status != 0:
            ctx.row.checks_failed.append(f"{station}: exit {run.status}: {tail(run.stderr)}")
    a_card.release()
    b_card.release()


def fleet_gateway_killed(ctx: FleetContext) -> None:
    """One station given both gateways (--endpoint GW1 --endpoint GW2, each behind its proxy),
    --max-rate 64MiB/s; 6 s in, the gateway carrying the upload (the proxy that forwarded the
    most bytes in the last second) is killed, and its proxy stopped: its port refuses
    connections, as a dead gateway's. Must exit 0 with every file there once, byte-identical."""
    (card,) = ctx.fleet_card()
    killed: list[int] = []

    def watch(kill, ended: threading.Event) -> None:
        if ended.wait(5):
            return
        before = [p.stats()["bytes_to_upstream"] for p in ctx.proxies]
        if ended.wait(1):
            return
        after = [p.stats()["bytes_to_upstream"] for p in ctx.proxies]
        index = 0 if after[0] - before[0] >= after[1] - before[1] else 1
        ctx.cluster.kill_gateway(index)
        ctx.take_sent(index)
        ctx.proxies[index].stop()
        ctx.faults += 1
        killed.append(index)

    run = ctx.station("station-a", card.mountpoint, [0, 1], rate=FLEET_RATE, watch=watch, timeout=300)
    if killed:
        index = killed[0]
        ctx.row.notes.append(f"gateway {index + 1} killed 6 s in (it carried the upload); exit {run.status} after "
                             f"{run.seconds:.0f} s")
        ctx.cluster.start_gateway(index)
        ctx.proxies[index] = F.Proxy(ctx.h.venv, ctx.cluster.gateway_ports[index], ctx.h.seed,
                                     os.path.join(ctx.dir, f"proxy-{index + 1}-again.log"))
    else:
        ctx.row.checks_failed.append(f"the run ended (status {run.status}) within 6 s: no gateway killed")
    if run.status != 0:
        ctx.row.checks_failed.append(f"exit {run.status} with a gateway killed: {tail(run.stderr)}")
    for index in range(2):
        ctx.take_sent(index)
    ctx.row.notes.append(f"sent {ctx.sent[0] / MiB:.1f} MiB through gateway 1, {ctx.sent[1] / MiB:.1f} MiB through "
                         f"gateway 2, for a card of {sum({f.xxh128: f.size for f in ctx.files}.values()) / MiB:.0f} MiB")
    card.release()


def fleet_volume_killed(ctx: FleetContext) -> None:
    """One station through gateway 1 (--max-rate 64MiB/s); 4 s in, volume server 1 (rack r1)
    is killed (replication 010: every volume has a copy in another rack). Must exit 0, or a
    rerun must (the row says which); every file byte-identical, no upload left open. The volume
    server is started again after the audit, which reads without it."""
    (card,) = ctx.fleet_card()

    def watch(kill, ended: threading.Event) -> None:
        if not ended.wait(4):
            ctx.cluster.kill_volume(0)
            ctx.faults += 1

    ctx.audit_hook = lambda: ctx.cluster.start_volume(0) if not ctx.cluster.running("volume1") else None
    run = ctx.station("station-a", card.mountpoint, [0], rate=FLEET_RATE, watch=watch)
    if ctx.cluster.running("volume1"):
        ctx.row.checks_failed.append(f"the run ended (status {run.status}) within 4 s: no volume server killed")
    if run.status == 0:
        ctx.row.notes.append(f"volume server 1 killed 4 s in: exit 0 ({run.seconds:.0f} s)")
    else:
        ctx.row.notes.append(f"volume server 1 killed 4 s in: exit {run.status}: {tail(run.stderr, 200)}")
        for attempt in range(3):
            again = ctx.station("station-a", card.mountpoint, [0])
            if again.status == 0:
                ctx.row.notes.append(f"rerun {attempt + 1}: exit 0")
                break
        else:
            ctx.row.checks_failed.append(f"no rerun exited 0 with a volume server down: {again.status}: {tail(again.stderr)}")
    ctx.row.notes.append(f"sent {ctx.take_sent(0) / MiB:.1f} MiB for a card of "
                         f"{sum({f.xxh128: f.size for f in ctx.files}.values()) / MiB:.0f} MiB")
    card.release()


def fleet_two_adopt(ctx: FleetContext) -> None:
    """Station A killed at 50 % of the clip's parts (gateway 1); then B (the same card, gateway
    1) and C (a clone, gateway 2) at once: both exit 0, one object per file, no upload open;
    the bytes each sent are reported against what A had not landed."""
    a_card, c_card = ctx.fleet_card(clones=2)
    a = ctx.station("station-a", a_card.mountpoint, [0], rate=FLEET_RATE, watch=kill_at_parts(ctx, 50))
    if not a.killed:
        ctx.row.checks_failed.append(f"station A ended (status {a.status}) before half the clip's parts")
        return
    left = ctx.settled_acknowledged()
    acknowledged = sum(size for _, _, size in left)
    ctx.take_sent(0)
    ctx.take_sent(1)
    runs: dict[str, F.Run] = {}

    def one(station: str, card: F.LoopCard, gateway: int) -> None:
        runs[station] = ctx.station(station, card.mountpoint, [gateway])

    threads = [threading.Thread(target=one, args=("station-b", a_card, 0)),
               threading.Thread(target=one, args=("station-c", c_card, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    sent = [ctx.take_sent(0), ctx.take_sent(1)]
    owed = FLEET_BIG - acknowledged + ctx.small_bytes()
    ctx.row.notes.append(f"A killed with {acknowledged / MiB:.0f} MiB of the clip acknowledged; then B sent "
                         f"{sent[0] / MiB:.1f} MiB, C {sent[1] / MiB:.1f} MiB, for {owed / MiB:.1f} MiB owed "
                         f"({sum(sent) / owed:.2f} x)")
    for station, run in sorted(runs.items()):
        if run.status != 0:
            ctx.row.checks_failed.append(f"{station}: exit {run.status}: {tail(run.stderr)}")
    a_card.release()
    c_card.release()


for _fleet_row in (fleet_clones, fleet_gateway_killed, fleet_volume_killed, fleet_two_adopt):
    _fleet_row.context = FleetContext


# ---------------------------------------------------------------------------
# Verdicts: what a fault leaves of a card's "safe to erase" on the next run

# Seconds after `staging_ended` at which the duplicate clip's repetitions are stopped, one each:
# at once (the clip's parts still streaming), inside the clip's upload (96 MiB at 20 MiB/s takes
# about 5 s), and about when the copy is made.
DUPLICATE_CLIP_DELAYS = (0.0, 0.7, 1.8, 3.2, 4.6)


def duplicate_clip(power: bool):
    """Issue 50: a card with a 96 MiB clip and the same bytes in another folder, uploaded at
    20 MiB/s (both are streamed while they are copied), stopped by kill -9 (or a power cut of the
    state directory) at one of DUPLICATE_CLIP_DELAYS after `staging_ended`, a moment per
    repetition. The next run of the card must exit 0 and leave, under the repetition's prefix,
    exactly two objects, at the two files' keys, each carrying its xxh128 (x-amz-meta-xxh128 or
    the xxh128 tag), none at an alternative key (`~` in the key); `ingest status` must say the
    card is safe to erase (and the bucket back it). The audit downloads every byte."""
    def scenario(ctx: Context) -> None:
        delay = DUPLICATE_CLIP_DELAYS[ctx.rep % len(DUPLICATE_CLIP_DELAYS)]
        card = os.path.join(ctx.dir, "card")
        clip = random_bytes(ctx.rng, 96 * MiB)
        F.write_file(card, "DCIM/CLIP_0001.MP4", clip, CARD_MTIME)
        F.write_file(card, "DCIM/SUB/CLIP_copy.MP4", clip, CARD_MTIME)
        del clip
        ctx.expect(card)
        staged = threading.Event()

        def on_event(event: dict, run: F.Run) -> None:
            if event.get("event") == "staging_ended":
                staged.set()

        def watch(kill, ended: threading.Event) -> None:
            while not staged.is_set():
                if ended.wait(0.002):
                    return
            if not ended.wait(delay):
                kill()

        def stopped(run: F.Run, state: str) -> None:
            what = "power cut" if power else "kill -9"
            if not staged.is_set():
                ctx.row.checks_failed.append(f"no staging_ended (exit {run.status}): nothing was tested")
            elif not run.killed:
                ctx.row.notes.append(f"the run ended (exit {run.status}) before its {what} {delay} s after staging_ended")
            again = ctx.run(card, state)
            if again.status != 0:
                ctx.row.checks_failed.append(f"{what} {delay} s after staging_ended: the next run exited "
                                             f"{again.status}: {tail(again.stderr)}")
                ctx.finish(card, state)
            by_path = {F.key_path(f.path): f for f in ctx.files}
            objects = card_objects(ctx)
            if len(objects) != 2:
                ctx.row.checks_failed.append(f"{what} {delay} s after staging_ended: {len(objects)} object(s) for 2 "
                                             f"files: {sorted(objects)}")
            for key in objects:
                if "~" in key:
                    ctx.row.checks_failed.append(f"{what} {delay} s after staging_ended: {key} is an alternative key")
                    continue
                file = next((f for path, f in by_path.items() if key.endswith("/" + path)), None)
                if file is None:
                    ctx.row.checks_failed.append(f"{key} is no file's key")
                    continue
                labelled = ctx.h.client.head_object(Bucket=BUCKET, Key=key).get("Metadata", {}).get("xxh128")
                if labelled is None:
                    tags = ctx.h.client.get_object_tagging(Bucket=BUCKET, Key=key).get("TagSet", [])
                    labelled = next((tag["Value"] for tag in tags if tag["Key"] == "xxh128"), None)
                if labelled != file.xxh128:
                    ctx.row.checks_failed.append(f"{what} {delay} s after staging_ended: {key} carries fingerprint "
                                                 f"{labelled or 'none'}, the card's file {file.xxh128}")
            Verdicts(ctx).status(state, f"after the {what} {delay} s after staging_ended", expect_safe=True)
            check_journal(ctx, state)
            ctx.row.notes.append(f"{what} {delay} s after staging_ended"
                                 f"{'' if run.killed else ' (run ended first)'}: next run exit {again.status}, "
                                 f"{len(objects)} object(s)")

        options = ["--max-rate", "20MiB/s"]
        if power:
            with PowerCuts(ctx, 512) as cuts:
                run = cuts.run(card, options=options, on_event=on_event, watch=watch, timeout=120)
                stopped(run, cuts.state)
        else:
            state = ctx.state()
            run = ctx.run(card, state, options=options, on_event=on_event, watch=watch, timeout=120)
            stopped(run, state)
    return scenario


def backed_by_download(ctx: Context) -> list[str]:
    """Why the bucket, read back, does not hold the card: a card file whose bytes no current
    object under the repetition's prefix holds (each object downloaded and fingerprinted with
    xxh128sum, the external oracle; labels and ETags are not looked at). Empty if it holds it."""
    objects = card_objects(ctx)
    downloads = tempfile.mkdtemp(dir=ctx.dir, prefix="readback.")
    try:
        paths = []
        for index, key in enumerate(sorted(objects)):
            path = os.path.join(downloads, str(index))
            F.download(ctx.h.client, {"Bucket": BUCKET, "Key": key}, path)
            paths.append(os.fsencode(path))
        held = set(F.hash_files(paths))
    finally:
        shutil.rmtree(downloads, ignore_errors=True)
    return [f"{f.path!r} ({f.xxh128}) is in no object" for f in ctx.files if f.xxh128 not in held]


class ProvenVerdicts:
    """Every "safe" a command says of the card (a run's summary, `status`, `verify-card` exit
    0), held against a download of the card's objects: none may be said while the bucket,
    read back, lacks a card file's bytes."""

    def __init__(self, ctx: Context, state: str) -> None:
        self.ctx, self.state = ctx, state
        self.claims = 0

    def hold(self, where: str, safe: bool) -> None:
        if not safe:
            return
        self.claims += 1
        missing = backed_by_download(self.ctx)
        if missing:
            self.ctx.row.checks_failed.append(f"{where} said safe while {missing[0]}")

    def run(self, card: str, where: str, options: list[str] = ()) -> F.Run:
        run = self.ctx.run(card, self.state, options=options)
        summary = next((e for e in run.events if e.get("event") == "summary"), {})
        self.hold(f"{where}: the run's summary", summary.get("safe_to_erase") is True)
        return run

    def status(self, where: str, check_bucket: bool = False) -> bool:
        args = ["status", "--state-dir", self.state, "--config", self.ctx.config, "--json"]
        run = self.ctx.command(args + (["--check-bucket"] if check_bucket else []), timeout=60)
        if run.status not in (0, 76):
            self.ctx.row.checks_failed.append(f"{where}: status exited {run.status}: {tail(run.stderr)}")
        cards = [event for event in run.events if event.get("event") == "card"]
        safe = bool(cards) and all(card.get("safe_to_erase") is True for card in cards)
        self.hold(f"{where}: status{' --check-bucket' if check_bucket else ''}", safe)
        return safe

    def verify(self, path: str, where: str) -> F.Run:
        run = self.ctx.command(["verify-card", path, "--state-dir", self.state, "--config", self.ctx.config, "--json"],
                               timeout=120)
        self.hold(f"{where}: verify-card (exit {run.status})", run.status == 0)
        return run


def forge(ctx: Context, key: str, size: int) -> None:
    """Other bytes of the same size at `key`, with the object's own metadata and tags copied,
    as someone with write access to the bucket would: only the bytes tell them apart."""
    head = ctx.h.client.head_object(Bucket=BUCKET, Key=key)
    tags = ctx.h.client.get_object_tagging(Bucket=BUCKET, Key=key).get("TagSet", [])
    arguments = {"Bucket": BUCKET, "Key": key, "Body": random_bytes(ctx.rng, size), "Metadata": head.get("Metadata", {})}
    if tags:
        arguments["Tagging"] = "&".join(f"{tag['Key']}={tag['Value']}" for tag in tags)
    ctx.h.client.put_object(**arguments)
    ctx.tampered.add(key)


def verdict_tampered(kind: str):
    """Issue 50: "safe to erase" only on proof. A card (a 12 MiB clip, multipart and streamed,
    and three photos) is ingested, then its bucket or its place is tampered with: `deleted`
    (a photo's object), `replaced-single` / `replaced-multipart` (other bytes of the same size
    at a photo's or the clip's key, metadata and tags copied), `replaced-reingested` (the
    same, then the card ingested again before any check), `other-bucket` (the card run with
    `--bucket` another, empty bucket), `empty-mount` (verify-card on an empty directory under
    /media). Every command's verdict is held against a download of the card's objects
    (ProvenVerdicts); the card must be repaired by its next run (a replaced file to its
    alternative key, the forgery never replaced) and then be safe."""
    def scenario(ctx: Context) -> None:
        # `status --check-bucket` takes its destination from the configuration.
        ctx.configure("s3", f'endpoint = "{ctx.h.proxy.endpoint}"')
        ctx.configure("s3", f'bucket = "{BUCKET}"')
        card = ctx.card("card", [("DCIM/CLIP_0001.MP4", 12 * MiB + 5), ("DCIM/IMG_0001.JPG", 300_000),
                                 ("DCIM/IMG_0002.JPG", 200_000), ("MISC/notes.txt", 900)])
        ctx.expect(card)
        state = ctx.state()
        verdicts = ProvenVerdicts(ctx, state)
        first = verdicts.run(card, "the first run")
        if first.status != 0:
            ctx.row.checks_failed.append(f"the first run exited {first.status}: {tail(first.stderr)}")
            return
        objects = card_objects(ctx)
        key_of = {path: next((k for k in objects if k.endswith("/" + path)), None)
                  for path in ("DCIM/CLIP_0001.MP4", "DCIM/IMG_0001.JPG")}
        if kind == "empty-mount":
            place = f"/media/ingest-faults-{secrets.token_hex(4)}"
            os.makedirs(place)
            try:
                run = verdicts.verify(place, "an empty mount point")
                if run.status != 66:
                    ctx.row.checks_failed.append(f"verify-card of an empty mount point exited {run.status}, not 66")
            finally:
                os.rmdir(place)
            return
        if kind == "other-bucket":
            other = f"{BUCKET}-{ctx.device_id}"
            ctx.h.client.create_bucket(Bucket=other)
            run = ctx.command([card, "--endpoint", ctx.h.proxy.endpoint, "--bucket", other, "--state-dir", state,
                               "--config", ctx.config, "--json"])
            summary = next((e for e in run.events if e.get("event") == "summary"), {})
            held = {item["Key"] for page in ctx.h.client.get_paginator("list_objects_v2").paginate(Bucket=other)
                    for item in page.get("Contents", []) if not F.HISTORY_KEY.match(item["Key"])
                    and not item["Key"].startswith(".ingest/")}
            if summary.get("safe_to_erase") is True and len(held) < len(ctx.files):
                ctx.row.checks_failed.append(f"safe for {other} with {len(held)} of {len(ctx.files)} objects there")
            if run.status != 0 or len(held) != len(ctx.files):
                ctx.row.checks_failed.append(f"the run to {other} exited {run.status} with {len(held)} objects there")
            ctx.row.notes.append(f"to {other}: exit {run.status}, {len(held)} objects, safe {summary.get('safe_to_erase')}")
            return
        if kind == "deleted":
            # Gone for good: its version removed, not hidden behind a delete marker.
            key = key_of["DCIM/IMG_0001.JPG"]
            version = ctx.h.client.head_object(Bucket=BUCKET, Key=key).get("VersionId")
            ctx.h.client.delete_object(Bucket=BUCKET, Key=key, **({"VersionId": version} if version else {}))
        else:
            path = "DCIM/CLIP_0001.MP4" if kind == "replaced-multipart" else "DCIM/IMG_0001.JPG"
            forge(ctx, key_of[path], objects[key_of[path]])
            # The forged key is left out of the audit, so its history cannot be held against
            # the bucket there; verify-card after the repair checks every file's object.
            ctx.history = "off"
        if kind != "replaced-reingested":
            run = verdicts.verify(card, "after the tampering")
            if run.status != 76:
                ctx.row.checks_failed.append(f"verify-card after the tampering exited {run.status}, not 76")
            verdicts.status("after the tampering", check_bucket=True)
            verdicts.status("after the check")
        rerun = verdicts.run(card, "the rerun")
        if rerun.status != 0:
            ctx.row.checks_failed.append(f"the rerun exited {rerun.status}: {tail(rerun.stderr)}")
        summary = next((e for e in rerun.events if e.get("event") == "summary"), {})
        if summary.get("already_in_bucket", 0) != 0:
            ctx.row.checks_failed.append(f"the rerun counted {summary.get('already_in_bucket')} already in the bucket")
        if not verdicts.status("after the rerun"):
            ctx.row.checks_failed.append("the card is not safe after the rerun repaired it")
        if verdicts.verify(card, "after the rerun").status != 0:
            ctx.row.checks_failed.append("verify-card after the repair does not say safe")
        ctx.row.notes.append(f"{kind}: {verdicts.claims} safe verdict(s) held against a download")
    return scenario


def foreign_cluster(ctx: Context) -> None:
    """Issue 50: a station whose journal knows cluster X (through the fault proxy), configured
    with [Y, X] where Y is another SeaweedFS with a bucket of the same name. A new card must land
    on X only, Y named foreign in the run (a `foreign_gateway` event) and its bucket left empty,
    marker included; `ingest check` must fail naming Y. Configured with [Y] alone, the run must
    say Y is a new destination, and the first card, known from X, must land on Y before it is
    called safe there. Every safe is held against a download of the cluster it is said of."""
    other = ctx.h.other_cluster()
    y = other.client()
    first = ctx.card("first", [("DCIM/IMG_0001.JPG", 200_000), ("DCIM/IMG_0002.JPG", 90_000)])
    second = ctx.card("second", [("DCIM/IMG_0101.JPG", 150_000), ("MISC/notes.txt", 500)])
    ctx.expect(first)
    ctx.expect(second)
    state = ctx.state()
    x = ctx.h.proxy.endpoint

    def objects_on(client) -> list[str]:
        return [item["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                for item in page.get("Contents", [])]

    def ingest(card: str, endpoints: list[str]) -> F.Run:
        args = [card]
        for endpoint in endpoints:
            args += ["--endpoint", endpoint]
        return ctx.command(args + ["--bucket", BUCKET, "--state-dir", state, "--config", ctx.config, "--json"])

    known = ingest(first, [x])
    if known.status != 0:
        ctx.row.checks_failed.append(f"the first card to X exited {known.status}: {tail(known.stderr)}")
        return
    mixed = ingest(second, [other.endpoint, x])
    foreign = [e for e in mixed.events if e.get("event") == "foreign_gateway"]
    if mixed.status != 0:
        ctx.row.checks_failed.append(f"the run with [Y, X] exited {mixed.status}: {tail(mixed.stderr)}")
    if not any(other.endpoint in json.dumps(e) for e in foreign):
        ctx.row.checks_failed.append(f"the run with [Y, X] did not name Y foreign: {foreign}")
    on_y = objects_on(y)
    if on_y:
        ctx.row.checks_failed.append(f"Y's bucket holds {len(on_y)} object(s) written through it: {on_y[:3]}")
    missing = backed_by_download(ctx)
    safe = next((e for e in mixed.events if e.get("event") == "summary"), {}).get("safe_to_erase") is True
    if safe and any("IMG_0101" in m or "notes" in m for m in missing):
        ctx.row.checks_failed.append(f"the run with [Y, X] said safe while on X {missing[0]}")
    check = ctx.command(["check", "--no-station", "--endpoint", other.endpoint, "--endpoint", x, "--bucket", BUCKET,
                         "--state-dir", state, "--config", ctx.config], timeout=120)
    if check.status == 0 or other.endpoint not in check.output.decode(errors="replace"):
        ctx.row.checks_failed.append(f"ingest check with [Y, X] exited {check.status} without naming Y")

    alone = ingest(first, [other.endpoint])
    said_new = any(e.get("event") == "new_destination" for e in alone.events)
    if not said_new:
        ctx.row.checks_failed.append("the run with [Y] alone did not say Y is a new destination")
    landed = {key for key in objects_on(y) if not key.startswith(".ingest/") and not F.HISTORY_KEY.match(key)}
    safe = next((e for e in alone.events if e.get("event") == "summary"), {}).get("safe_to_erase") is True
    if safe and len(landed) < 2:
        ctx.row.checks_failed.append(f"the first card said safe on Y with {len(landed)} of 2 objects there")
    if alone.status != 0 or len(landed) != 2:
        ctx.row.checks_failed.append(f"the first card to Y alone: exit {alone.status}, {len(landed)} of 2 objects there")
    ctx.row.notes.append(f"[Y, X]: exit {mixed.status}, {len(foreign)} foreign line(s), {len(on_y)} object(s) on Y; "
                         f"check exit {check.status}; [Y] alone: new destination {said_new}, {len(landed)} objects on Y")


def tus_terminated(ctx: TusContext) -> None:
    """Issue 50, on a tus server: a card ingested, then one upload terminated on the server (its
    bytes and .info removed, as an expiry or someone else's DELETE would). `verify-card` must
    exit 76, `status --check-bucket` must find it (one HEAD per upload, at the URL each
    completion recorded) and the card not be safe; the rerun sends the file again. Every safe
    verdict said on the way is held against the server's stored bytes (xxh128sum of every
    whole upload under the repetition's prefix)."""
    card = ctx.card("card", [("DCIM/DJI_0001.JPG", 400_000), ("DCIM/DJI_0002.MP4", 20 * MiB + 3),
                             ("MISC/flight.log", 700)])
    ctx.expect(card)
    state = ctx.state()

    def hold(where: str, safe: bool) -> None:
        if not safe:
            return
        whole = [u for u in ctx.tus.uploads(ctx.prefix) if u.get("offset") == u.get("size")]
        held = set(F.hash_files([os.fsencode(u["path"]) for u in whole]))
        missing = [f.path for f in ctx.files if f.xxh128 not in held]
        if missing:
            ctx.row.checks_failed.append(f"{where} said safe while {missing[0]!r} is in no whole upload")

    def summary_safe(run: F.Run) -> bool:
        return next((e for e in run.events if e.get("event") == "summary"), {}).get("safe_to_erase") is True

    def status(where: str, check: bool = False) -> bool:
        run = ctx.command(["status", "--state-dir", state, "--config", ctx.config, "--json"]
                          + (["--check-bucket"] if check else []), timeout=60)
        safe = any(e.get("event") == "card" and e.get("safe_to_erase") is True for e in run.events)
        hold(f"{where}: status", safe)
        return safe

    def verify(where: str) -> int:
        run = ctx.command(["verify-card", card, "--state-dir", state, "--config", ctx.config, "--json"], timeout=120)
        hold(f"{where}: verify-card", run.status == 0)
        return run.status

    first = ctx.run(card, state)
    hold("the first run", summary_safe(first))
    if first.status != 0:
        ctx.row.checks_failed.append(f"the first run exited {first.status}: {tail(first.stderr)}")
        return
    clip = next((u for u in ctx.tus.uploads(ctx.prefix) if u["key"].endswith("/DCIM/DJI_0002.MP4")), None)
    if clip is None:
        ctx.row.checks_failed.append("no upload of DCIM/DJI_0002.MP4 on the server")
        return
    for path in (clip["path"], clip["path"] + ".info"):
        os.remove(path)
    ctx.faults += 1
    if (code := verify("after the termination")) != 76:
        ctx.row.checks_failed.append(f"verify-card after the termination exited {code}, not 76")
    if status("after the termination", check=True):
        ctx.row.checks_failed.append("status --check-bucket says safe with an upload terminated")
    status("after the check")
    again = ctx.run(card, state)
    hold("the rerun", summary_safe(again))
    if again.status != 0 or not status("after the rerun"):
        ctx.row.checks_failed.append(f"the rerun exited {again.status} and did not make the card safe: {tail(again.stderr)}")
    if (code := verify("after the rerun")) != 0:
        ctx.row.checks_failed.append(f"verify-card after the rerun exited {code}")


tus_terminated.context = TusContext


def scenarios(short: bool, reps: int | None) -> list[tuple[str, object, int]]:
    r = reps or (1 if short else 3)
    out: list[tuple[str, object, int, bool]] = []
    short_kills = {"first-staged", "multipart-initiating", "mid-parts", "last-part-uploaded", "completing",
                   "first-uploaded", "random", "resume-reconciling"}
    for point in list(KILL_POINTS) + ["random", "resume-reconciling"]:
        out.append((f"kill -9 at {point}", kill_at(point), r, point in short_kills))
    out += [
        ("proxy: resets", proxy_faults(["reset:PUT:partNumber=:every=3:count=4", "reset:PUT:*:every=5:count=3",
                                        "reset:POST:uploadId=:count=1"]), r, True),
        ("proxy: stalls", proxy_faults(["stall:PUT:partNumber=:every=4:count=2:seconds=20",
                                        "stall:POST:uploadId=:count=1:seconds=20"]), 1, False),
        ("proxy: 503 storm at start (3 s of 503 SlowDown)", proxy_faults(["slowdown:*:*:count=1000"], seconds=3), r, False),
        ("proxy: 503 storm mid-upload (3 s)", proxy_faults(["slowdown:*:*:count=1000"], seconds=3,
                                                           start_on="part_uploaded"), r, True),
        ("proxy: 500s", proxy_faults(["error500:PUT,POST:*:every=2:count=12"]), r, False),
        ("proxy: answers cut off", proxy_faults(["truncate:POST:uploadId=:count=2",
                                                 "truncate:PUT:partNumber=:every=3:count=2",
                                                 "truncate:PUT:*:every=4:count=2"]), r, True),
        ("proxy: CreateMultipartUpload answers cut off", proxy_faults(["truncate:POST:?uploads:count=2"]), r, True),
        ("server killed and restarted", server_restart, max(1, r - 1), True),
        ("card pulled mid-copy", card_pulled, 1, True),
        ("staging disk full", staging_full, 1, True),
        ("credentials expiring mid-upload", credentials_expiring, r, True),
        ("journal: kill -9 at random moments", journal_kills(3, 1000) if short else journal_kills(8, 2500), 1, True),
        ("journal: kill -9 inside a commit (strace, at a write to the WAL)", journal_commit_kills(5, 1000), 1, False),
        ("power cut: small files at random moments", power_cut_small(4), r, True),
        ("power cut: streamed uploads of two large files",
         power_cut_large(96 * MiB, 16 * MiB, 2, True) if short else power_cut_large(512 * MiB, 32 * MiB, 3, True),
         r, True),
        ("power cut: staged multipart uploads of two large files (stream_parts = false)",
         power_cut_large(512 * MiB, 32 * MiB, 3, False), r, False),
        ("power cut: right after a run exits 0", power_cut_after_success, r, True),
        ("power cut: inside a journal checkpoint (strace holds a write to journal.sqlite)",
         power_cut_checkpoints(6, 2500), 1, False),
        ("kill -9 while streaming, then the card removed; resume", killed_streaming_card_removed, 1, True),
    ]
    for percent in (20, 50, 80):
        out.append((f"tus: kill -9 at {percent} % of a 300 MiB file", tus_kill_at(percent), 1, True))
    out += [
        ("tus: power cut mid-upload (twice, a 200 MiB file at 32 MiB/s)", tus_power_cut(), r, True),
        # Not in --short: against tuspyserver, which holds an upload's lock while a broken PATCH
        # of it is still read, a reset costs about one chunk, at the row's bound of one per fault.
        ("tus: proxy resets and a stall", tus_proxy_faults(["reset:PATCH:*:every=3:count=3:fraction=0.5",
                                                            "stall:PATCH:*:count=1:seconds=20",
                                                            "reset:POST:*:count=1"]), 1, False),
    ]
    short_kills = {"first-staged", "clip-verify", "local-write", "chain-late", "after-last-object"}
    short_cuts = {"local-write", "manifest-held", "chain-held"}
    for point, (moment, _, _, _) in HISTORY_POINTS.items():
        out.append((f"history: kill -9 {moment}", history_fault(point, False), r, point in short_kills))
    for point, (moment, _, _, _) in HISTORY_POINTS.items():
        out.append((f"history: power cut {moment}", history_fault(point, True), r, point in short_cuts))
    out += [
        ("history: the manifest PUT's answers lost (the proxy cuts them off)",
         history_answers_lost(MANIFEST_PUT, "manifest"), r, False),
        ("history: the chain PUT's answers lost (the proxy cuts them off)", history_answers_lost(CHAIN_PUT, "chain"),
         r, True),
        ("racing triggers (one card, two ingests)", racing, r, True),
        ("racing triggers (ingest --device twice at once)", racing_device, 1, True),
        ("same label, other bytes, one after the other", same_label(False), 1, True),
        ("same label, other bytes, at once", same_label(True), 1, True),
        ("a server that ignores If-None-Match (412s answered 200)", server_ignoring_conditions, 1, True),
        ("two stations, same card", two_stations(True), 1, False),
        ("two stations, same label, other bytes", two_stations(False), 1, True),
        ("hostile names", hostile_names, 1, True),
    ]
    for kind in ("symlink-dev-zero", "fifo", "symlink-host-file", "65KiB", "tags-device", "nul-in-value"):
        out.append((f"ingest-scene.toml: {kind}", scene_file(kind), 1, True))
    for fs in ("ext2", "ext3"):
        out.append((f"hostile card: {fs} (not in [device] file_systems)", refused_file_system(fs), 1, fs == "ext2"))
    out += [
        ("hostile card: the station disk's UUID, then rescan", station_uuid_rescan, 1, True),
        ("hostile card: dated 1901, 1969, 1970 and 2300", far_dates, 1, True),
        ("hostile card: a 16 TiB sparse file between two photos", giant_sparse, 1, True),
        ("hostile card: links and a mount of another file system", links_and_mounts(False), 1, True),
        ("hostile card: a bind mount of the card's own file system", links_and_mounts(True), 1, True),
        ("hostile card: escape sequences in names on the console", console_escapes, 1, True),
    ]
    for percent in (25, 50, 75):
        out.append((f"fleet handover at {percent} % of a 600 MiB file", fleet_handover(percent), 1, percent == 50))
    n = len(DUPLICATE_CLIP_DELAYS)
    out += [
        (f"verdict_duplicate_clip_kill: a 96 MiB clip and its copy at 20 MiB/s, kill -9 at {n} moments after "
         f"staging_ended", duplicate_clip(False), n, True),
        (f"verdict_duplicate_clip_power_cut: a 96 MiB clip and its copy at 20 MiB/s, power cut at {n} moments after "
         f"staging_ended", duplicate_clip(True), n, False),
    ]
    out.append(("verdict_tus_terminated: a tus upload terminated on the server; every verdict held against its bytes",
                tus_terminated, 1, True))
    out.append(("verdict_foreign_cluster: [Y, X] with Y another cluster, a bucket of the same name; then [Y] alone",
                foreign_cluster, 1, False))
    for kind, what, in_short in (
            ("deleted", "a photo's object deleted", True),
            ("replaced-single", "a photo's object replaced, same size, metadata copied", True),
            ("replaced-multipart", "the clip's object replaced, same size, metadata and tags copied", True),
            ("replaced-reingested", "a photo's object replaced, then the card ingested again", False),
            ("other-bucket", "the card run against another, empty bucket", False),
            ("empty-mount", "verify-card on an empty directory under /media", True)):
        out.append((f"verdict_{kind.replace('-', '_')}: {what}; every verdict held against a download",
                    verdict_tampered(kind), 1, in_short))
    out += [
        ("fleet clones at once (two stations, two gateways)", fleet_clones, 1, False),
        ("fleet gateway killed (one station given both)", fleet_gateway_killed, 1, True),
        ("fleet volume server killed", fleet_volume_killed, 1, False),
        ("fleet two adopt at once (A killed at 50 %, then B and C)", fleet_two_adopt, 1, False),
    ]
    return [(name, fn, 1 if short else reps_, ) for name, fn, reps_, in_short in out if in_short or not short]


# Rows left out with --server rgw: those that need SeaweedFS itself (killed and restarted, its
# identities reloaded, a second cluster, the fleet's cluster), no S3 server at all (tus), or a
# stream, which a server that keeps no checksums never gets (ReadyDestination.keepsChecksums).
SEAWEEDFS_ONLY = re.compile(r"^(server killed and restarted|credentials expiring|verdict_foreign_cluster|fleet|tus:|"
                            r"verdict_tus|power cut: streamed|kill -9 while streaming)")


# ---------------------------------------------------------------------------
# Report


COLUMNS = ["scenario", "runs", "faults", "expected", "verified", "lost", "replaced", "duplicate", "corrupt",
           "open", "re-sent MiB", "extra MiB", "MHL", "result"]


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---"] + ["--:"] * 12 + [":--"]) + "|"]
    for row in rows:
        if row.error:
            result = "ERROR"
        elif row.failed:
            result = "**FAIL**"
        else:
            result = "ok"
        lines.append("| " + " | ".join([
            row.name.replace("|", "\\|"), str(row.runs), str(row.faults), str(row.expected), str(row.verified),
            str(row.lost), str(row.replaced), str(row.duplicates), str(row.corrupt), str(row.open_uploads),
            f"{row.resent / MiB:.1f}", f"{row.extra / MiB:.1f}", str(row.generations), result]) + " |")
    return "\n".join(lines)


def details(rows: list[Row]) -> str:
    out = []
    for row in rows:
        items = ([f"check: {c}" for c in row.checks_failed] + ([f"error: {row.error}"] if row.error else [])
                 + row.notes)
        if not items:
            continue
        shown = dedupe(items)
        out.append(f"- **{row.name}**: " + "; ".join(shown[:6]) + (f"; … ({len(shown) - 6} more)" if len(shown) > 6 else ""))
    return "\n".join(out)


def dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item.replace("|", "\\|").replace("\n", " "))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", action="store_true", help="a subset, one repetition each (make faults-short)")
    parser.add_argument("--only", help="run only scenarios whose name matches this regular expression")
    parser.add_argument("--reps", type=int, help="repetitions of the repeated scenarios (default 3; short 1)")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("FAULTS_SEED", "11")))
    parser.add_argument("--markdown", help="also write the table and notes to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (cards, states, logs)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--server", choices=["seaweedfs", "rgw"], default="seaweedfs",
                        help="the S3 server every row runs against (rgw: a one-node Ceph RGW, scripts/rgw.sh); "
                             "with rgw, the rows that need SeaweedFS itself (its restart, its identities, a second "
                             "cluster, the fleet's), the tus rows and the streaming rows (RGW keeps no checksums, "
                             "so nothing is streamed to it) are left out")
    args = parser.parse_args()
    chosen = scenarios(args.short, args.reps)
    if args.server != "seaweedfs":
        chosen = [s for s in chosen if not SEAWEEDFS_ONLY.search(s[0])]
    if args.only:
        chosen = [s for s in chosen if re.search(args.only, s[0])]
    if args.list:
        for name, _, reps in chosen:
            print(f"{reps}x  {name}")
        return 0
    if os.geteuid() != 0:
        print("faults: run as root (loop devices, mounts, tmpfs, cgroups)", file=sys.stderr)
        return 2
    harness = Harness(args)
    started = time.monotonic()
    interrupted = []

    def on_signal(signum, frame):
        interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        harness.start()
        for name, fn, reps in chosen:
            row = Row(name)
            harness.rows.append(row)
            began = time.monotonic()
            for rep in range(reps):
                ctx = getattr(fn, "context", Context)(harness, row, rep)  # TusContext for tus rows
                try:
                    fn(ctx)
                except KeyboardInterrupt:
                    raise
                except Exception as error:
                    row.error = f"{type(error).__name__}: {error}"
                    traceback.print_exc()
                finally:
                    try:
                        ctx.audit()
                    except Exception as error:
                        row.error = row.error or f"audit: {type(error).__name__}: {error}"
                        traceback.print_exc()
                    if ctx.audit_hook:
                        ctx.audit_hook()
            row.seconds = time.monotonic() - began
            F.log(f"{name}: runs {row.runs}, faults {row.faults}, expected {row.expected}, verified {row.verified}, "
                  f"lost {row.lost}, replaced {row.replaced}, dup {row.duplicates}, corrupt {row.corrupt}, "
                  f"open {row.open_uploads}, MHL generations {row.generations}{' FAIL' if row.failed else ''} "
                  f"({row.seconds:.0f} s)")
            for item in dedupe(row.checks_failed + ([row.error] if row.error else []) + row.notes):
                F.log(f"  {item}")
    except KeyboardInterrupt:
        F.log("interrupted")
        if harness.rows:
            harness.rows[-1].error = "interrupted"
    finally:
        F.CLEANUP.run()
        if not args.keep:
            shutil.rmtree(harness.work, ignore_errors=True)
        else:
            F.log(f"kept {harness.work}")
    seconds = time.monotonic() - started
    text = table(harness.rows)
    notes = details(harness.rows)
    failed = [row for row in harness.rows if row.failed]
    form = "make faults-short" if args.short else "make faults"
    summary = (f"{len(harness.rows)} scenarios, {len(failed)} failing, in {seconds / 60:.1f} min "
               f"({form}, seed {args.seed}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print(text)
    print()
    if notes:
        print(notes)
        print()
    print(summary)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(text + "\n\n" + (notes + "\n\n" if notes else "") + summary + "\n")
    if interrupted:
        return 128 + interrupted[0]
    if any(row.error for row in harness.rows):
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
