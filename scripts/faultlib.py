"""Infrastructure for scripts/faults.py: SeaweedFS, the fault proxy, cards, the ingest binary
and the oracle that counts what landed in a bucket by downloading it.

Everything runs on 127.0.0.1; every process started here is remembered by its PID and
stopped by it (never by name); every loop device and mount made here is undone on exit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

import botocore.config
import botocore.exceptions
import botocore.session

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XXH_EMPTY = "99aa06d3014798d86001c324468d497f"  # xxh128 of nothing


def log(message: str) -> None:
    print(f"faults {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def free_ports(count: int, twins: bool = False) -> list[int]:
    """Free 127.0.0.1 ports; with twins, port + 10000 is free too (SeaweedFS's gRPC ports)."""

    def bindable(port: int) -> int | None:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return s.getsockname()[1]
            except OSError:
                return None

    ports: list[int] = []
    for _ in range(1000):
        if len(ports) == count:
            return ports
        port = bindable(0)
        if port and port not in ports and (not twins or (port < 55535 and bindable(port + 10000))):
            ports.append(port)
    raise RuntimeError("no free ports on 127.0.0.1")


class Cleanup:
    """Undo actions, run last-in first-out on every exit path."""

    def __init__(self) -> None:
        self.actions: list[tuple[str, object]] = []
        self.lock = threading.Lock()

    def push(self, name: str, action) -> None:
        with self.lock:
            self.actions.append((name, action))

    def remove(self, action) -> None:
        with self.lock:
            self.actions = [(n, a) for n, a in self.actions if a is not action]

    def run(self) -> None:
        while True:
            with self.lock:
                if not self.actions:
                    return
                name, action = self.actions.pop()
            try:
                action()
            except Exception as error:  # keep undoing the rest
                log(f"cleanup {name}: {error}")


CLEANUP = Cleanup()


def stop_process(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `grace`: only this process, by its PID."""
    if process.poll() is None:
        try:
            process.terminate()
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        except ProcessLookupError:
            pass


# ---------------------------------------------------------------------------
# SeaweedFS


def s3_client(endpoint: str, admin: tuple[str, str], timeout: float = 30):
    """A botocore S3 client of `endpoint` with the admin credentials: path-style addressing,
    three attempts, `timeout` to connect (and at least 30 s to read)."""
    session = botocore.session.get_session()
    return session.create_client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=admin[0], aws_secret_access_key=admin[1],
        config=botocore.config.Config(
            s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=timeout, read_timeout=max(timeout, 30)))


class Weed:
    """`weed server -s3` on fixed free ports, restartable on the same ports and data."""

    def __init__(self, venv: str, directory: str, admin_key: str, admin_secret: str) -> None:
        self.venv = venv
        self.directory = directory
        self.admin = (admin_key, admin_secret)
        self.extra: dict[str, str] = {}  # more identities: access key -> secret
        self.ports = free_ports(4, twins=True)
        self.s3_port = self.ports[3]
        self.endpoint = f"http://127.0.0.1:{self.s3_port}"
        self.process: subprocess.Popen | None = None
        self.starts = 0
        os.makedirs(os.path.join(directory, "data"), exist_ok=True)
        self.config_path = os.path.join(directory, "s3.json")
        self.write_identities()

    def write_identities(self) -> None:
        identities = [{"name": "faults-admin", "credentials": [{"accessKey": self.admin[0], "secretKey": self.admin[1]}],
                       "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]
        for index, (key, secret) in enumerate(self.extra.items()):
            identities.append({"name": f"faults-temp-{index}", "credentials": [{"accessKey": key, "secretKey": secret}],
                               "actions": ["Admin", "Read", "List", "Tagging", "Write"]})
        temporary = self.config_path + ".new"
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            json.dump({"identities": identities}, out)
        os.replace(temporary, self.config_path)

    def start(self) -> None:
        log_file = open(os.path.join(self.directory, "weed.log"), "ab")
        self.process = subprocess.Popen(
            [os.path.join(self.venv, "bin", "weed"), "server", f"-dir={self.directory}/data", "-ip=127.0.0.1",
             "-ip.bind=127.0.0.1", f"-master.port={self.ports[0]}", f"-volume.port={self.ports[1]}",
             f"-filer.port={self.ports[2]}", "-s3", f"-s3.port={self.s3_port}", f"-s3.config={self.config_path}",
             "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
             "-master.volumeSizeLimitMB=512", "-volume.max=100"],
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log_file.close()
        self.starts += 1
        CLEANUP.push("weed", self.stop)

    def wait(self, seconds: float = 90) -> None:
        client = self.client(timeout=3)
        deadline = time.monotonic() + seconds
        while True:
            try:
                client.list_buckets()
                return
            except Exception:
                pass
            if self.process is None or self.process.poll() is not None or time.monotonic() > deadline:
                tail = open(os.path.join(self.directory, "weed.log"), errors="replace").read()[-2000:]
                raise RuntimeError(f"SeaweedFS did not answer on {self.endpoint}:\n{tail}")
            time.sleep(0.25)

    def stop(self, kill: bool = False) -> None:
        if self.process is not None:
            if kill and self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
            stop_process(self.process)
            CLEANUP.remove(self.stop)
            self.process = None

    def reload(self) -> None:
        """SIGHUP: SeaweedFS reads its -s3.config again."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGHUP)

    def client(self, timeout: float = 30):
        return s3_client(self.endpoint, self.admin, timeout)


class RGW:
    """A one-node Ceph RGW on loopback (scripts/rgw.sh: one monitor, a memstore OSD, radosgw),
    started with the admin credentials as its S3 user and stopped by its PIDs; what `faults.py
    --server rgw` runs every row against instead of SeaweedFS (issue 51)."""

    def __init__(self, venv: str, directory: str, admin_key: str, admin_secret: str) -> None:
        self.venv = venv
        self.directory = directory
        self.admin = (admin_key, admin_secret)
        self.script = os.path.join(REPO, "scripts", "rgw.sh")
        # The rows write gigabytes, every version kept: a memstore of 1 GiB fills and the OSD
        # stalls (measured), so 12 GiB of this machine's 24.
        self.environment = dict(os.environ, VENV=venv, AWS_ACCESS_KEY_ID=admin_key, AWS_SECRET_ACCESS_KEY=admin_secret,
                                AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                                RGW_MEMSTORE_BYTES=str(12 << 30))
        self.endpoint = ""
        self.s3_port = 0

    def start(self, bucket: str) -> None:
        CLEANUP.push("rgw", self.stop)
        started = subprocess.run(["bash", self.script, "start", self.directory, bucket], env=self.environment,
                                 capture_output=True, text=True, timeout=180)
        if started.returncode != 0:
            raise RuntimeError(f"Ceph RGW did not start: {started.stderr[-2000:]}")
        self.endpoint = started.stdout.strip().splitlines()[-1]
        self.s3_port = int(self.endpoint.rsplit(":", 1)[1])

    def stop(self) -> None:
        subprocess.run(["bash", self.script, "stop", self.directory], env=self.environment, capture_output=True,
                       timeout=60)
        CLEANUP.remove(self.stop)

    def client(self, timeout: float = 30):
        return s3_client(self.endpoint, self.admin, timeout)


class Cluster:
    """A SeaweedFS cluster on 127.0.0.1, as scripts/cluster.sh starts one (the fleet's test bed):
    one master (-defaultReplication=010: every volume has a copy in another rack), three volume
    servers in racks r1, r2, r3 of one data centre, one filer, and two S3 gateways on it, each on
    a free port whose gRPC twin is free too. Every process is remembered by its Popen (its PID):
    `kill_gateway(i)` and `kill_volume(i)` SIGKILL one, `start_gateway(i)` and `start_volume(i)`
    start it again on its port and data; `stop()` (registered with CLEANUP) stops them all."""

    def __init__(self, venv: str, directory: str, admin_key: str, admin_secret: str) -> None:
        self.venv = venv
        self.directory = directory
        self.admin = (admin_key, admin_secret)
        ports = free_ports(7, twins=True)
        self.master_port, self.volume_ports, self.filer_port = ports[0], ports[1:4], ports[4]
        self.gateway_ports = ports[5:7]
        self.endpoints = [f"http://127.0.0.1:{port}" for port in self.gateway_ports]
        self.processes: dict[str, subprocess.Popen] = {}
        for name in ("master", "filer", "volume1", "volume2", "volume3"):
            os.makedirs(os.path.join(directory, name), exist_ok=True)
        self.config_path = os.path.join(directory, "s3.json")
        with open(os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            json.dump({"identities": [{"name": "faults-admin",
                                       "credentials": [{"accessKey": admin_key, "secretKey": admin_secret}],
                                       "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}, out)

    def launch(self, name: str, args: list[str]) -> None:
        log_file = open(os.path.join(self.directory, f"{name}.log"), "ab")
        self.processes[name] = subprocess.Popen([os.path.join(self.venv, "bin", "weed"), *args], stdout=log_file,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log_file.close()

    def start(self) -> None:
        """Starts every server, and returns once both gateways answer (`wait`)."""
        CLEANUP.push("cluster", self.stop)
        # -peers=none: one master, no Raft quorum to wait for; volume limits as in Weed.start.
        self.launch("master", ["master", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-port={self.master_port}",
                               f"-mdir={self.directory}/master", "-peers=none", "-defaultReplication=010",
                               "-volumeSizeLimitMB=512", "-telemetry=false"])
        for index in range(3):
            self.start_volume(index)
        self.launch("filer", ["filer", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-port={self.filer_port}",
                              f"-master=127.0.0.1:{self.master_port}", f"-defaultStoreDir={self.directory}/filer"])
        for index in range(2):
            self.start_gateway(index, wait=False)
        self.wait()

    def start_volume(self, index: int) -> None:
        """Volume server `index` (0-2), in rack r{index + 1}, on its port and data."""
        self.launch(f"volume{index + 1}", [
            "volume", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-port={self.volume_ports[index]}",
            f"-dir={self.directory}/volume{index + 1}", f"-mserver=127.0.0.1:{self.master_port}",
            "-dataCenter=dc1", f"-rack=r{index + 1}", "-max=50"])

    def start_gateway(self, index: int, wait: bool = True) -> None:
        """S3 gateway `index` (0 or 1) on its port; with `wait`, returns once it answers."""
        self.launch(f"s3-{index + 1}", [
            "s3", "-ip.bind=127.0.0.1", f"-port={self.gateway_ports[index]}", f"-filer=127.0.0.1:{self.filer_port}",
            f"-config={self.config_path}", "-port.iceberg=0", "-port.lance=0"])
        if wait:
            self.wait([index])

    def wait(self, gateways: list[int] = (0, 1), seconds: float = 90) -> None:
        deadline = time.monotonic() + seconds
        for index in gateways:
            client = self.client(index, timeout=3)
            while True:
                try:
                    client.list_buckets()
                    break
                except Exception:
                    pass
                process = self.processes.get(f"s3-{index + 1}")
                if process is None or process.poll() is not None or time.monotonic() > deadline:
                    tail = open(os.path.join(self.directory, f"s3-{index + 1}.log"), errors="replace").read()[-2000:]
                    raise RuntimeError(f"gateway {index + 1} did not answer on {self.endpoints[index]}:\n{tail}")
                time.sleep(0.25)

    def kill(self, name: str) -> None:
        process = self.processes.get(name)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)

    def kill_gateway(self, index: int) -> None:
        """SIGKILL to S3 gateway `index` (0 or 1): its port refuses connections from now on."""
        self.kill(f"s3-{index + 1}")

    def kill_volume(self, index: int) -> None:
        """SIGKILL to volume server `index` (0-2)."""
        self.kill(f"volume{index + 1}")

    def running(self, name: str) -> bool:
        process = self.processes.get(name)
        return process is not None and process.poll() is None

    def stop(self) -> None:
        """Every server: SIGTERM, SIGKILL after 10 s."""
        # All at once, each SIGKILLed after 10 s: one by one, seven weeds take a minute to stop.
        processes = [p for p in self.processes.values() if p.poll() is None]
        for process in processes:
            process.terminate()
        deadline = time.monotonic() + 10
        for process in processes:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        self.processes.clear()
        CLEANUP.remove(self.stop)

    def conditional_writes_hold(self, bucket: str) -> bool:
        """A key written through gateway 1, then written again with If-None-Match: * through
        gateway 2: True when that is refused with 412 (the stations' coordination rests on it)."""
        key = f".cluster-check-{os.getpid()}-{time.monotonic_ns()}"
        first, second = self.client(0), self.client(1)
        first.put_object(Bucket=bucket, Key=key, Body=b"first\n")
        try:
            second.put_object(Bucket=bucket, Key=key, Body=b"second\n", IfNoneMatch="*")
            held = False
        except botocore.exceptions.ClientError as error:
            held = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412
        first.delete_object(Bucket=bucket, Key=key)
        return held

    def client(self, index: int = 0, timeout: float = 30):
        """A botocore S3 client of gateway `index`, as Weed.client."""
        return s3_client(self.endpoints[index], self.admin, timeout)


# ---------------------------------------------------------------------------
# The fault proxy (Tests/Tools/fault_proxy.py)


class Proxy:
    def __init__(self, venv: str, upstream_port: int, seed: int, log_path: str) -> None:
        self.log_file = open(log_path, "ab")
        self.process = subprocess.Popen(
            [os.path.join(venv, "bin", "python"), os.path.join(REPO, "Tests", "Tools", "fault_proxy.py"),
             "--upstream", f"127.0.0.1:{upstream_port}", "--seed", str(seed), "--verbose"],
            stdout=subprocess.PIPE, stderr=self.log_file, stdin=subprocess.DEVNULL, text=True)
        CLEANUP.push("proxy", self.stop)
        line = self.process.stdout.readline().split()
        if len(line) < 4 or line[0] != "listening":
            raise RuntimeError(f"fault proxy did not start: {line}")
        self.port = int(line[1].rpartition(":")[2])
        self.admin = f"http://{line[3]}"
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.admin + path, data=data, method=method)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def rules(self, rules: list[str]) -> None:
        self.call("PUT", "/rules", rules)

    def reset(self) -> None:
        self.call("DELETE", "/stats")

    def stats(self) -> dict:
        return self.call("GET", "/stats")

    def matched(self) -> list[int]:
        """How many requests each rule has matched, in order: a rule with count=0 never fires,
        so it only counts (the fleet rows count completes and aborts of an upload so)."""
        answer = self.call("GET", "/rules")
        return [rule["matched"] for rule in (answer["rules"] if isinstance(answer, dict) else answer)]

    def stop(self) -> None:
        stop_process(self.process, 5)
        CLEANUP.remove(self.stop)


# ---------------------------------------------------------------------------
# A tus 1.0 server (scripts/tus_server.py: tuspyserver under uvicorn)


class TusServer:
    """scripts/tus_server.py on a free port, storing uploads in `directory`: each upload is
    DIRECTORY/ID (its bytes) beside DIRECTORY/ID.info (JSON: "metadata", "size", "offset").
    Stopped by its PID (SIGTERM), at the end whatever happens."""

    def __init__(self, venv: str, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.log_file = open(os.path.join(os.path.dirname(directory), "tus_server.log"), "ab")
        self.process = subprocess.Popen(
            [os.path.join(venv, "bin", "python"), "-u", os.path.join(REPO, "scripts", "tus_server.py"),
             "--dir", directory, "--port", "0"],
            stdout=subprocess.PIPE, stderr=self.log_file, stdin=subprocess.DEVNULL, text=True)
        CLEANUP.push("tus server", self.stop)
        line = self.process.stdout.readline().split()
        if len(line) < 2 or line[0] != "listening":
            raise RuntimeError(f"tus server did not start: {line}")
        self.port = int(line[1].rpartition(":")[2])

    def uploads(self, prefix: str = "") -> list[dict]:
        """Every upload whose key (metadata "filename") starts with `prefix`: its .info as the
        server wrote it, with "id", "path" (its bytes) and "key" added."""
        found = []
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(".info"):
                continue
            try:
                with open(os.path.join(self.directory, name)) as file:
                    info = json.load(file)
            except (OSError, ValueError):
                continue  # being written
            metadata = info.get("metadata") or {}
            key = metadata.get("filename") or ""
            if not key.startswith(prefix):
                continue
            info["id"] = name[:-len(".info")]
            info["path"] = os.path.join(self.directory, info["id"])
            info["key"] = key
            found.append(info)
        return found

    def held_bytes(self, prefix: str) -> int:
        """The bytes the server holds of the uploads under `prefix`: each key's largest offset."""
        held: dict[str, int] = {}
        for info in self.uploads(prefix):
            held[info["key"]] = max(held.get(info["key"], 0), int(info.get("offset") or 0))
        return sum(held.values())

    def settled_offset(self, prefix: str, quiet: float = 1.0, limit: float = 40.0) -> int:
        """held_bytes once it has not changed for `quiet` seconds (a PATCH the server was still
        reading when its client died ends): at most `limit` seconds."""
        deadline = time.monotonic() + limit
        last, since = self.held_bytes(prefix), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = self.held_bytes(prefix)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return last

    def stop(self) -> None:
        stop_process(self.process, 10)
        CLEANUP.remove(self.stop)


def audit_tus(server: TusServer, prefix: str, files: list["CardFile"], orphans_allowed: bool) -> "Count":
    """Counts the uploads under `prefix` against the card files, by the server's stored bytes:
    each card file must have exactly one whole upload (offset = size) at a key ending in its
    path, whose bytes' xxh128sum is the file's and whose metadata xxh128 says so too, or (ingest
    dedupes by content per destination, and a tus server copies nothing) its bytes must be
    another card file's whole upload. A whole
    upload of bytes no card file holds is corrupt; one beyond the first of a file, a duplicate;
    an unfinished upload is open, or (`orphans_allowed`: a creation whose answer was lost
    leaves one the client never knew of) a note: orphans expire on the server. The card's ASC
    MHL history (ascmhl/ keys) is no card file's: counted in a note, not checked here."""
    count = Count(expected=len(files))
    uploads = server.uploads(prefix)
    whole = [u for u in uploads if u.get("size") is not None and int(u.get("offset") or 0) == int(u["size"])]
    hashes = hash_files([os.fsencode(u["path"]) for u in whole])
    for upload, digest in zip(whole, hashes):
        upload["xxh128"] = digest
    history = [u for u in whole if HISTORY_KEY.match(u["key"])]
    whole = [u for u in whole if not HISTORY_KEY.match(u["key"])]
    count.objects = len(whole)
    count.versions = len(uploads)
    claimed: set[str] = set()
    for f in files:
        suffix = "/" + key_path(f.path)
        mine = [u for u in whole if u["key"].endswith(suffix) and u["xxh128"] == f.xxh128]
        if not mine:
            elsewhere = [u for u in whole if u["xxh128"] == f.xxh128]
            if elsewhere:
                # Dedupe by content per destination: a tus server copies nothing, so a file
                # whose bytes another card file's upload holds gets no upload of its own.
                count.verified += 1
                count.notes.append(f"{f.path.decode(errors='replace')} deduplicated: its bytes are the upload of "
                                   f"{elsewhere[0]['key'].rpartition('/')[2]!r}")
                continue
            count.lost += 1
            count.notes.append(f"lost {f.path!r}")
            continue
        count.verified += 1
        claimed.add(mine[0]["id"])
        if len(mine) > 1:
            count.duplicates += len(mine) - 1
            count.notes.append(f"duplicate {mine[0]['key']!r}: {len(mine)} whole uploads")
            claimed.update(u["id"] for u in mine)
    known = {f.xxh128 for f in files}
    for upload in whole:
        recorded = (upload.get("metadata") or {}).get("xxh128")
        if upload["xxh128"] not in known:
            count.corrupt += 1
            count.notes.append(f"corrupt upload {upload['id'][:12]} of {upload['key']!r}: its bytes are no card file's")
        elif recorded != upload["xxh128"]:
            count.corrupt += 1
            count.notes.append(f"corrupt upload {upload['id'][:12]} of {upload['key']!r}: bytes {upload['xxh128']}, "
                               f"metadata xxh128 {recorded}")
        elif upload["id"] not in claimed:
            count.duplicates += 1
            count.notes.append(f"duplicate upload {upload['id'][:12]} of {upload['key']!r} (no card file's key)")
    unfinished = [u for u in uploads if not (u.get("size") is not None and int(u.get("offset") or 0) == int(u["size"]))]
    if unfinished:
        if orphans_allowed:
            count.notes.append(f"{len(unfinished)} unfinished upload(s) left (offsets "
                               f"{', '.join(str(u.get('offset')) for u in unfinished)}): orphan uploads expire on the server")
        else:
            count.open_uploads = len(unfinished)
            for u in unfinished:
                count.notes.append(f"unfinished upload {u['id'][:12]} of {u['key']!r} at {u.get('offset')} of {u.get('size')}")
    if history:
        count.notes.append(f"{len(history)} ASC MHL history upload(s) (not checked on tus)")
    count.needed_bytes = sum({f.xxh128: f.size for f in files}.values())
    return count


# ---------------------------------------------------------------------------
# Cards


def write_file(root: bytes | str, relative: bytes | str, data: bytes, mtime: float | None = None) -> None:
    root_b = os.fsencode(root)
    rel_b = os.fsencode(relative)
    path = os.path.join(root_b, rel_b)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def hash_files(paths: list[bytes]) -> list[str]:
    """xxh128sum of each file (the external oracle), in order. Names holding a newline or a
    backslash (which xxh128sum may print raw or escaped) are hashed one by one from stdin."""
    hashes: dict[int, str] = {}
    plain = [(i, p) for i, p in enumerate(paths) if b"\n" not in p and b"\\" not in p]
    for index, path in enumerate(paths):
        if b"\n" in path or b"\\" in path:
            with open(path, "rb") as stdin:
                out = subprocess.run(["xxh128sum"], stdin=stdin, check=True, capture_output=True).stdout
            hashes[index] = out.split(b" ", 1)[0].decode()
    for start in range(0, len(plain), 200):
        batch = plain[start:start + 200]
        out = subprocess.run(["xxh128sum", "--", *[p for _, p in batch]], check=True, capture_output=True).stdout
        lines = out.split(b"\n")
        for (index, path), line in zip(batch, lines):
            digest, _, name = line.partition(b"  ")
            if name != path:
                raise RuntimeError(f"xxh128sum printed {line!r} for {path!r}")
            hashes[index] = digest.decode()
    return [hashes[i] for i in range(len(paths))]


@dataclass
class CardFile:
    card: str
    path: bytes  # relative, raw bytes
    size: int
    xxh128: str


def card_files(root: str, skip: tuple[bytes, ...] = (b"ingest-scene.toml",)) -> list[CardFile]:
    """Every regular file of a card (symlinks and special files are not ingested), with xxh128sum."""
    found: list[tuple[bytes, int]] = []
    root_b = os.fsencode(root)
    for directory, dirs, files in os.walk(root_b):
        dirs[:] = [d for d in dirs if d != b"lost+found"]
        for name in files:
            full = os.path.join(directory, name)
            st = os.lstat(full)
            relative = os.path.relpath(full, root_b)
            if relative in skip or not (st.st_mode & 0o170000 == 0o100000):
                continue
            found.append((relative, st.st_size))
    hashes = hash_files([os.path.join(root_b, rel) for rel, _ in found])
    return [CardFile(root, rel, size, digest) for (rel, size), digest in zip(found, hashes)]


class Udevd:
    """A udev daemon, so that loop devices get their ID_FS_LABEL and ID_FS_UUID as cards do: the
    machine's if one answers, else one started here and stopped by its PID at the end."""

    process: subprocess.Popen | None = None

    @classmethod
    def ensure(cls) -> None:
        def ping() -> bool:
            return subprocess.run(["udevadm", "control", "--ping", "-t", "1"], capture_output=True).returncode == 0

        if ping():
            return
        os.makedirs("/run/udev", exist_ok=True)
        cls.process = subprocess.Popen(["/lib/systemd/systemd-udevd"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        CLEANUP.push("udevd", cls.stop)
        for _ in range(100):
            if ping():
                return
            time.sleep(0.05)
        log("udevd does not answer: cards will be known by their device node, not their label")

    @classmethod
    def stop(cls) -> None:
        if cls.process is not None:
            stop_process(cls.process, 10)
            cls.process = None


class UsbCardRule:
    """The test suites' udev rule (Tests/IngestIntegrationTests/Harness.swift, `TestCardRule`):
    a loop device backed by an image named `ingest-card-*.img` gets ID_BUS=usb, so that udev
    describes it as a card in a USB reader. Installed once per run under this process's id
    (the Swift tests' copies carry theirs), removed at the end."""

    path = f"/run/udev/rules.d/98-ingest-test-card-{os.getpid()}.rules"
    text = ('SUBSYSTEM=="block", KERNEL=="loop[0-9]*", ATTR{loop/backing_file}=="*/ingest-card-*.img", '
            'ENV{ID_BUS}="usb"\n')

    @classmethod
    def ensure(cls) -> None:
        if os.path.exists(cls.path):
            return
        os.makedirs(os.path.dirname(cls.path), exist_ok=True)
        with open(cls.path, "w") as out:
            out.write(cls.text)
        CLEANUP.push("udev rule", cls.remove)
        subprocess.run(["udevadm", "control", "--reload"], check=False, capture_output=True)

    @classmethod
    def remove(cls) -> None:
        if os.path.exists(cls.path):
            os.unlink(cls.path)
            subprocess.run(["udevadm", "control", "--reload"], check=False, capture_output=True)

    @staticmethod
    def image_name(tag: str) -> str:
        return f"ingest-card-{tag}.img"


class LoopCard:
    """A file-system image on a loop device, mounted at a directory (unless `mount` is False): a
    card udev knows by label and UUID. ext4 unless `fs` names another mkfs (ext2, ext3…);
    `uuid` gives the file system that UUID; `mkfs_args` go to mkfs as they are. An image named
    by ``UsbCardRule.image_name`` is a card in a USB reader to udev."""

    def __init__(self, image: str, mountpoint: str, size_mib: int, label: str, fs: str = "ext4",
                 uuid: str | None = None, mkfs_args: tuple[str, ...] = (), mount: bool = True) -> None:
        self.image, self.mountpoint, self.label = image, mountpoint, label
        self.device: str | None = None
        Udevd.ensure()
        if os.path.basename(image).startswith("ingest-card-"):
            UsbCardRule.ensure()
        os.makedirs(mountpoint, exist_ok=True)
        with open(image, "wb") as out:
            out.truncate(size_mib * 1048576)
        subprocess.run([f"mkfs.{fs}", "-q", "-F", "-m", "0", "-L", label, *(["-U", uuid] if uuid else []),
                        *mkfs_args, image], check=True)
        CLEANUP.push("loop card", self.release)
        self.attach(mount)

    @classmethod
    def clone(cls, source: "LoopCard", image: str, mountpoint: str) -> "LoopCard":
        """A copy of `source`'s image (unmounted or mounted read-only, so that it is whole) on a
        loop device of its own, mounted read-only at `mountpoint`: the same file system UUID and
        label, so the same card to ingest, as a card cloned with dd."""
        card = cls.__new__(cls)
        card.image, card.mountpoint, card.label, card.device = image, mountpoint, source.label, None
        os.makedirs(mountpoint, exist_ok=True)
        subprocess.run(["cp", "--sparse=always", source.image, image], check=True)
        CLEANUP.push("loop card", card.release)
        card.attach(mount=False)
        subprocess.run(["mount", "-o", "ro", card.device, mountpoint], check=True)
        return card

    @property
    def rdev(self) -> tuple[int, int]:
        """The loop device's major and minor numbers."""
        st = os.stat(self.device)
        return os.major(st.st_rdev), os.minor(st.st_rdev)

    def attach(self, mount: bool = True) -> None:
        self.device = subprocess.run(["losetup", "-f", "--show", self.image], check=True, capture_output=True,
                                     text=True).stdout.strip()
        if mount:
            subprocess.run(["mount", self.device, self.mountpoint], check=True)
        # udev reads the label and UUID, as for a real card inserted.
        subprocess.run(["udevadm", "trigger", "--action=change", self.device], check=False, capture_output=True)
        subprocess.run(["udevadm", "settle", "--timeout=10"], check=False, capture_output=True)
        properties = subprocess.run(["udevadm", "info", "--query=property", f"--name={self.device}"],
                                    capture_output=True, text=True).stdout
        if f"ID_FS_LABEL={self.label}" not in properties:
            log(f"udev does not know {self.device} by its label {self.label}")

    def remount_ro(self) -> None:
        """Unmount (which drops this file system's page cache) and mount again read-only."""
        subprocess.run(["sync"], check=False)
        subprocess.run(["umount", self.mountpoint], check=True)
        subprocess.run(["mount", "-o", "ro", self.device, self.mountpoint], check=True)

    def pull(self) -> None:
        """The card is gone: the loop device's backing file empties, every read fails (EIO)."""
        shutil.copyfile(self.image, self.image + ".saved") if not os.path.exists(self.image + ".saved") else None
        os.truncate(self.image, 0)
        subprocess.run(["losetup", "-c", self.device], check=False)

    def detach(self) -> None:
        if os.path.ismount(self.mountpoint):
            if subprocess.run(["umount", self.mountpoint], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.mountpoint], check=False)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], check=False, capture_output=True)
            self.device = None

    def reinsert(self) -> None:
        self.detach()
        if os.path.exists(self.image + ".saved"):
            os.replace(self.image + ".saved", self.image)
        self.attach()
        subprocess.run(["mount", "-o", "remount,ro", self.mountpoint], check=False)

    def release(self) -> None:
        self.detach()
        CLEANUP.remove(self.release)


def throttle_reads(device: str, bytes_per_second: int) -> str | None:
    """A cgroup v1 blkio group throttling reads of `device` (a card's speed); None without blkio."""
    base = "/sys/fs/cgroup/blkio"
    if not os.path.isdir(base):
        return None
    rdev = os.stat(device).st_rdev
    path = os.path.join(base, f"ingest-faults-{os.getpid()}-{os.path.basename(device)}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "blkio.throttle.read_bps_device"), "w") as out:
            out.write(f"{os.major(rdev)}:{os.minor(rdev)} {bytes_per_second}")
    except OSError as error:
        log(f"no read throttle for {device}: {error}")
        release_cgroup(path)
        return None
    CLEANUP.push("cgroup", lambda: release_cgroup(path))
    return path


def mounts_of(major: int, minor: int) -> list[str]:
    """The mount points of the file system on device major:minor (/proc/self/mountinfo)."""
    points = []
    with open("/proc/self/mountinfo", "rb") as table:
        for line in table:
            fields = line.split(b" ")
            if fields[2] == f"{major}:{minor}".encode():
                points.append(fields[4].decode("unicode_escape"))
    return points


def release_cgroup(path: str | None) -> None:
    if path and os.path.isdir(path):
        for _ in range(50):
            try:
                os.rmdir(path)
                return
            except OSError:
                time.sleep(0.1)


class Tmpfs:
    def __init__(self, mountpoint: str, size: str) -> None:
        self.mountpoint = mountpoint
        os.makedirs(mountpoint, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "faults-staging", mountpoint],
                       check=True)
        CLEANUP.push("tmpfs", self.release)

    def release(self) -> None:
        if os.path.ismount(self.mountpoint):
            if subprocess.run(["umount", self.mountpoint], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", self.mountpoint], check=False)
        CLEANUP.remove(self.release)


class PowerCutState:
    """A state directory that loses power, the way xfstests cuts it: an ext4 file system of its
    own (a sparse image, mounted on a loop device) that `cut()` shuts down without flushing its
    log (`xfs_io -x -c shutdown`, no -f), so that every write not synced before is gone once
    `remount()` has mounted the image again. The mount point is the state directory. As a
    control, each cut is preceded by a write of its own that is never synced: `kept` counts the
    cuts it outlived (a cut that loses nothing tests nothing). Unmounted by `release()`, or at
    the end whatever happens."""

    def __init__(self, image: str, mountpoint: str, size_mib: int) -> None:
        self.image = image
        self.mountpoint = mountpoint
        self.canary = os.path.join(mountpoint, ".power-cut-canary")
        self.cuts = 0
        self.kept = 0
        os.makedirs(mountpoint, exist_ok=True)
        with open(image, "wb") as out:
            out.truncate(size_mib * 1048576)
        subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True, capture_output=True)
        self.mount()
        CLEANUP.push("power-cut state", self.release)

    def mount(self) -> None:
        subprocess.run(["mount", "-o", "loop", self.image, self.mountpoint], check=True)
        os.chmod(self.mountpoint, 0o700)
        if os.path.exists(self.canary):
            self.kept += 1
            os.unlink(self.canary)

    def cut(self) -> None:
        """The power goes: the file system refuses every call from now on (EIO), and what it had
        not written to its log is lost."""
        with open(self.canary, "w") as out:
            out.write("not synced\n")
        subprocess.run(["xfs_io", "-x", "-c", "shutdown", self.mountpoint], check=True, capture_output=True)
        self.cuts += 1

    def unmount(self) -> None:
        """Unmounts (after a cut, once the processes that used it are gone); lazily if it stays
        busy for 5 s."""
        for _ in range(50):
            if not os.path.ismount(self.mountpoint):
                return
            if subprocess.run(["umount", self.mountpoint], capture_output=True).returncode == 0:
                return
            time.sleep(0.1)
        subprocess.run(["umount", "-l", self.mountpoint], check=False)

    def remount(self) -> None:
        """The power is back: the image mounted again (its journal replayed), on a new loop device."""
        self.unmount()
        self.mount()

    def release(self) -> None:
        self.unmount()
        CLEANUP.remove(self.release)


# ---------------------------------------------------------------------------
# Running ingest


@dataclass
class Run:
    argv: list[str]
    status: int | None = None  # exit status; negative: killed by that signal
    killed: bool = False  # killed by this harness (the fault)
    timed_out: bool = False
    events: list[dict] = field(default_factory=list)
    stderr: str = ""
    output: bytes = b""  # stdout and stderr as written, raw
    seconds: float = 0.0

    def count(self, name: str) -> int:
        return sum(1 for event in self.events if event.get("event") == name)


class Ingest:
    """The real release binary, with an environment made for this harness only."""

    def __init__(self, binary: str, env: dict[str, str]) -> None:
        self.binary = binary
        self.env = env

    def start(self, args: list[str], env: dict[str, str] | None = None, cgroup: str | None = None,
              wrapper: list[str] = ()) -> tuple[subprocess.Popen, Run]:
        argv = [*wrapper, self.binary, *args]
        environment = {**self.env, **(env or {})}
        environment = {k: v for k, v in environment.items() if v != ""}  # "" unsets

        def enter_cgroup() -> None:
            if cgroup:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as out:
                    out.write(str(os.getpid()))

        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                   env=environment, preexec_fn=enter_cgroup if cgroup else None)
        CLEANUP.push("ingest", process.kill)
        return process, Run(argv=argv)

    def run(self, args: list[str], timeout: float = 120, kill_when=None, kill_after: float | None = None,
            env: dict[str, str] | None = None, on_event=None, cgroup: str | None = None,
            wrapper: list[str] = (), before_kill=None, watch=None) -> Run:
        """Runs ingest; `kill_when(event, run)` returning True sends SIGKILL from here at that event,
        `kill_after` seconds after the start likewise; `on_event(event, run)` sees every event;
        `wrapper` runs it under another program (strace; a kill then kills ingest under it too);
        `before_kill()` is called right before that SIGKILL (a power cut goes first);
        `watch(kill, ended)` runs in a thread beside the run, with the function that kills it and an
        Event set once the run has ended."""
        process, run = self.start(args, env, cgroup, wrapper)
        started = time.monotonic()
        stderr_chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: stderr_chunks.append(process.stderr.read()), daemon=True)
        reader.start()
        lock = threading.Lock()
        ended = threading.Event()

        def kill() -> None:
            with lock:
                if process.poll() is None and not run.killed:
                    run.killed = True
                    if before_kill is not None:
                        before_kill()
                    # Each may have ended meanwhile (during a power cut, on the EIO it got).
                    for pid in (children(process.pid) if wrapper else []) + [process.pid]:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass

        if watch is not None:
            watcher = threading.Thread(target=watch, args=(kill, ended), daemon=True)
            watcher.start()
        timers = []
        if kill_after is not None:
            timers.append(threading.Timer(kill_after, kill))

        def expire() -> None:
            if process.poll() is None:
                run.timed_out = True
                with lock:
                    if process.poll() is None:
                        os.kill(process.pid, signal.SIGKILL)

        timers.append(threading.Timer(timeout, expire))
        for timer in timers:
            timer.daemon = True
            timer.start()
        stdout_chunks: list[bytes] = []
        for raw in process.stdout:
            stdout_chunks.append(raw)
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            run.events.append(event)
            if on_event is not None:
                on_event(event, run)
            if kill_when is not None and not run.killed and kill_when(event, run):
                kill()
        process.wait()
        ended.set()
        for timer in timers:
            timer.cancel()
        if watch is not None:
            watcher.join(10)
        reader.join(10)
        CLEANUP.remove(process.kill)
        run.status = process.returncode
        run.output = b"".join(stdout_chunks) + b"".join(stderr_chunks)
        run.stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
        run.seconds = time.monotonic() - started
        return run


def children(pid: int) -> list[int]:
    """The PIDs of a process's children (its main thread's)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listing:
            return [int(child) for child in listing.read().split()]
    except FileNotFoundError:
        return []


# ---------------------------------------------------------------------------
# The oracle: what is in the bucket, by downloading every version of every object


@dataclass
class Count:
    expected: int = 0
    verified: int = 0
    lost: int = 0
    replaced: int = 0
    duplicates: int = 0
    corrupt: int = 0
    open_uploads: int = 0
    objects: int = 0
    versions: int = 0
    sent_bytes: int = 0
    needed_bytes: int = 0
    notes: list[str] = field(default_factory=list)
    generations: int = 0  # ASC MHL generations in the bucket that verified (chain, C4, listing, ascmhl)
    history_problems: list[str] = field(default_factory=list)  # failed checks of the cards' histories

    @property
    def resent_bytes(self) -> int:
        return max(0, self.sent_bytes - self.needed_bytes)


def download(client, arguments: dict, path: str, patience: float = 60) -> str | None:
    """GetObject into `path`; returns the object's x-amz-meta-xxh128. A server error (5xx) is
    asked again for up to `patience` seconds: a SeaweedFS just restarted answers listings
    before it serves every volume's data. Raises what the last attempt raised."""
    deadline = time.monotonic() + patience
    while True:
        try:
            answer = client.get_object(**arguments)
            with open(path, "wb") as out:
                for chunk in iter(lambda: answer["Body"].read(1 << 20), b""):
                    out.write(chunk)
            return answer.get("Metadata", {}).get("xxh128")
        except botocore.exceptions.ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status < 500 or time.monotonic() > deadline:
                raise
        time.sleep(1)


def audit_prefix(client, bucket: str, prefix: str, files: list[CardFile], work: str, versioned: bool,
                 known: list[CardFile] = (), forbidden: list[CardFile] = (), history: str = "if-present",
                 ascmhl: str | None = None, generations: int | None = None, tampered: set[str] = frozenset()) -> Count:
    """Downloads every version of every object under `prefix` and counts against the card files
    (`files`: expected in the bucket; `known`: on a card, but not expected; `forbidden`: the
    host's files, off the card, each of which in the bucket counts as corrupt and is named).

    Every file has an object of its own: bytes that two card files hold are expected in two
    objects, and only current objects beyond the card files holding those bytes are duplicates.
    The cards' ASC MHL histories (`<folder>ascmhl/NNNN_….mhl` and `ascmhl_chain.xml`, bytes of
    no card file) are no card file's objects: they are checked by `check_history` instead, in
    each folder that holds one (`history` "if-present"), and, with "required", every card
    folder (`card_folder`) must hold one; "off" checks none. `generations`: how many each
    folder's history must have. Their failures go to `history_problems`. `tampered`: keys the
    scenario wrote as someone else would (a forgery of an object), whose versions are no
    ingest's: they are left out, and the card files must be found elsewhere."""
    count = Count(expected=len(files))
    versions: list[dict] = []  # Key, VersionId, IsLatest, DeleteMarker
    if versioned:
        paginator = client.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for version in page.get("Versions", []):
                versions.append({"Key": version["Key"], "VersionId": version.get("VersionId"),
                                 "IsLatest": version.get("IsLatest", True), "DeleteMarker": False})
            for marker in page.get("DeleteMarkers", []):
                versions.append({"Key": marker["Key"], "VersionId": marker.get("VersionId"),
                                 "IsLatest": marker.get("IsLatest", True), "DeleteMarker": True})
    else:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                versions.append({"Key": item["Key"], "VersionId": None, "IsLatest": True, "DeleteMarker": False})
    versions = [v for v in versions if v["Key"] not in tampered]
    downloads = tempfile.mkdtemp(dir=work, prefix="download.")
    try:
        paths: list[bytes] = []
        meta: list[str | None] = []
        real = [v for v in versions if not v["DeleteMarker"]]
        readable = []
        for index, version in enumerate(real):
            arguments = {"Bucket": bucket, "Key": version["Key"]}
            if version["VersionId"] and version["VersionId"] != "null":
                arguments["VersionId"] = version["VersionId"]
            path = os.path.join(downloads, str(index))
            try:
                meta.append(download(client, arguments, path))
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
                # Listed but not readable: its bytes are nowhere to be had, so it counts as
                # corrupt, named, and the card file it was for as lost.
                version["xxh128"], version["recorded"] = None, None
                count.corrupt += 1
                count.notes.append(f"unreadable {version['Key']!r}: {error}")
                continue
            version["path"] = path
            readable.append(version)
            paths.append(os.fsencode(path))
        hashes = hash_files(paths)
        for version, digest, recorded in zip(readable, hashes, meta):
            version["xxh128"] = digest
            version["recorded"] = recorded
        expected_hashes = {f.xxh128 for f in files} | {f.xxh128 for f in known}
        # A card's history: at its place, and bytes of no card file (a card may hold an ascmhl/ of its own).
        for version in versions:
            version["history"] = bool(HISTORY_KEY.match(version["Key"])) and version.get("xxh128") not in expected_hashes
        count.versions = len(real)
        current = [v for v in versions if v["IsLatest"] and not v["DeleteMarker"] and not v["history"]]
        count.objects = len(current)
        current_hashes = [v["xxh128"] for v in current if v["xxh128"] is not None]
        present = set(current_hashes)
        for f in files:
            if f.xxh128 in present:
                count.verified += 1
            else:
                count.lost += 1
                where = "only in an older version" if any(v.get("xxh128") == f.xxh128 for v in real) else "nowhere"
                count.notes.append(f"lost {os.path.basename(f.card)}/{f.path!r} ({where})")
        by_key: dict[str, set[str]] = {}
        for version in versions:
            if not version["history"]:
                by_key.setdefault(version["Key"], set()).add("deleted" if version["DeleteMarker"] else version["xxh128"])
        for key, contents in by_key.items():
            if len(contents) > 1:
                count.replaced += 1
                count.notes.append(f"replaced {key!r}")
        # Each card file its own object: a content is duplicated beyond the card files holding it.
        holders: dict[str, int] = {}
        for f in files:
            holders[f.xxh128] = holders.get(f.xxh128, 0) + 1
        objects_of: dict[str, list[str]] = {}
        for v in current:
            if v["xxh128"] is not None:
                objects_of.setdefault(v["xxh128"], []).append(v["Key"])
        for digest, keys in objects_of.items():
            extra = len(keys) - max(1, holders.get(digest, 0))
            if extra > 0:
                count.duplicates += extra
                count.notes.append(f"duplicate {keys[-1]!r} = {keys[0]!r} ({len(keys)} objects, "
                                   f"{holders.get(digest, 0)} card file(s) of those bytes)")
        host = {f.xxh128: f for f in forbidden}
        for version in readable:
            if version["history"]:
                continue
            if version["xxh128"] in host:
                count.corrupt += 1
                count.notes.append(f"host file {host[version['xxh128']].path!r} (off the card) uploaded as {version['Key']!r}")
            elif version["xxh128"] not in expected_hashes:
                count.corrupt += 1
                count.notes.append(f"corrupt {version['Key']!r}: its bytes ({version['xxh128']}) are no card file's")
            elif version["recorded"] is not None and version["recorded"] != version["xxh128"]:
                count.corrupt += 1
                count.notes.append(f"corrupt {version['Key']!r}: bytes {version['xxh128']}, "
                                   f"x-amz-meta-xxh128 {version['recorded']}")
        if history != "off":
            folders: dict[str, list[dict]] = {}
            for version in versions:
                if version["history"]:
                    folders.setdefault(HISTORY_KEY.match(version["Key"])["folder"], []).append(version)
            if history == "required" and not count.lost and files:
                for v in current:
                    folders.setdefault(card_folder(v["Key"]), [])
            for folder, history_versions in sorted(folders.items()):
                objects = {v["Key"][len(folder):]: v for v in current if v["Key"].startswith(folder)}
                checked = check_history(folder, history_versions, objects, downloads, ascmhl, generations)
                count.generations += checked.verified
                count.history_problems += checked.problems
                count.notes += checked.notes
    finally:
        shutil.rmtree(downloads, ignore_errors=True)
    uploads = client.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
    count.open_uploads = len(uploads)
    for upload in uploads:
        count.notes.append(f"open multipart upload {upload.get('UploadId', '')[:12]}… of {upload['Key']!r}")
    distinct: dict[str, int] = {f.xxh128: f.size for f in files}
    count.needed_bytes = sum(distinct.values())
    return count


# ---------------------------------------------------------------------------
# A card's ASC MHL history in the bucket: `<card folder>ascmhl/NNNN_<folder>_<date>.mhl`, one per
# generation, and `ascmhl_chain.xml`, the chain of their C4 ids


HISTORY_KEY = re.compile(r"^(?P<folder>(?:[^/]+/)*)ascmhl/(?P<name>ascmhl_chain\.xml|[0-9]{4}_[^/]+\.mhl)$")
CHAIN_NAME = "ascmhl_chain.xml"
C4_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def card_folder(key: str) -> str:
    """The card's folder of a key the default template made: {device}/{card_date}/{label}-{card_id}/."""
    return "".join(segment + "/" for segment in key.split("/")[:3])


def c4_id(data: bytes) -> str:
    """The C4 id (SMPTE ST 2114) of `data`: SHA-512 in base 58, padded with '1' to 88 digits, after 'c4'."""
    value = int.from_bytes(hashlib.sha512(data).digest(), "big")
    digits = ""
    while value:
        value, digit = divmod(value, 58)
        digits = C4_ALPHABET[digit] + digits
    return "c4" + digits.rjust(88, "1")


def _tag(element) -> str:
    return element.tag.rpartition("}")[2]


def parse_chain(data: bytes) -> list[tuple[int, str, str]]:
    """(sequence number, manifest file name, C4 id) of each generation an ascmhl_chain.xml holds."""
    out = []
    for hashlist in ElementTree.fromstring(data).iter():
        if _tag(hashlist) != "hashlist":
            continue
        fields = {_tag(child): (child.text or "").strip() for child in hashlist}
        out.append((int(hashlist.get("sequencenr", "0")), fields.get("path", ""), fields.get("c4", "")))
    return out


def parse_manifest(data: bytes) -> dict[str, str]:
    """path -> xxh128 of each file a manifest (one generation) lists; a path without an
    xxh128 maps to ''. Directory entries (<directoryhash>) are not files."""
    out: dict[str, str] = {}
    for entry in ElementTree.fromstring(data).iter():
        if _tag(entry) != "hash":
            continue
        path, digest = None, ""
        for child in entry:
            if _tag(child) == "path":
                path = (child.text or "").strip()
            elif _tag(child) == "xxh128":
                digest = (child.text or "").strip()
        if path is not None:
            out[path] = digest
    return out


@dataclass
class History:
    folder: str
    chain: list[tuple[int, str, str]] = field(default_factory=list)
    manifests: dict[str, bytes] = field(default_factory=dict)  # file name -> bytes (current versions)
    listed: dict[str, tuple[int, str]] = field(default_factory=dict)  # path -> (generation, xxh128)
    problems: list[str] = field(default_factory=list)
    verified: int = 0
    notes: list[str] = field(default_factory=list)


def read_history(folder: str, manifests: dict[str, bytes], chain: bytes | None) -> History:
    """The history `chain` and `manifests` (file name -> bytes) of a folder make up, with what
    is wrong in it: sequence numbers not 1..N, a chained manifest missing or not of its C4 id,
    a manifest no chain names (a generation written twice, or a chain not uploaded), a file
    listed by two generations."""
    h = History(folder, manifests=dict(manifests))
    where = f"{folder}ascmhl/"
    if chain is None:
        if manifests:
            h.problems.append(f"{where}: {len(manifests)} manifest(s), no {CHAIN_NAME}")
        return h
    try:
        h.chain = parse_chain(chain)
    except ElementTree.ParseError as error:
        h.problems.append(f"{where}{CHAIN_NAME} does not parse: {error}")
        return h
    numbers = [number for number, _, _ in h.chain]
    if numbers != list(range(1, len(numbers) + 1)):
        h.problems.append(f"{where}{CHAIN_NAME}: generations {numbers}, not 1..{len(numbers)}")
    for number, name, c4 in h.chain:
        data = manifests.get(name)
        if data is None:
            h.problems.append(f"{where}{CHAIN_NAME}: generation {number}'s manifest {name} is not in the bucket")
            continue
        if c4_id(data) != c4:
            h.problems.append(f"{where}{name}: C4 id {c4_id(data)[:16]}…, the chain says {c4[:16]}…")
        if not name.startswith(f"{number:04d}_"):
            h.problems.append(f"{where}{name} is generation {number} of the chain")
        try:
            listing = parse_manifest(data)
        except ElementTree.ParseError as error:
            h.problems.append(f"{where}{name} does not parse: {error}")
            continue
        for path, digest in listing.items():
            if path in h.listed:
                h.problems.append(f"{where}: {path!r} listed by generation {h.listed[path][0]} and {number}")
            else:
                h.listed[path] = (number, digest)
    chained = {name for _, name, _ in h.chain}
    for name in sorted(set(manifests) - chained):
        h.problems.append(f"{where}{name} is in the bucket but in no generation of the chain "
                          f"(a generation written twice?)")
    return h


def check_history(folder: str, versions: list[dict], objects: dict[str, dict], downloads: str,
                  ascmhl: str | None, generations: int | None = None) -> History:
    """A card folder's history as the audit downloaded it (`versions`: every version of its
    history keys; `objects`: the folder's current objects by path relative to it, hashed):
    no manifest ever replaced and every version of the chain a beginning of the current one
    (nothing is rewritten, only added), the chain and manifests consistent (`read_history`),
    each object of the folder listed once with its bytes' xxh128 (and nothing listed that is
    not an object), `generations` of them when given; then the folder, as a client downloads
    it, passes the ASC's tool: `ascmhl diff` and `ascmhl create -h xxh128` (on this copy)."""
    where = f"{folder}ascmhl/"
    by_name: dict[str, list[dict]] = {}
    for version in versions:
        by_name.setdefault(HISTORY_KEY.match(version["Key"])["name"], []).append(version)

    def read(version: dict) -> bytes:
        with open(version["path"], "rb") as file:
            return file.read()

    manifests: dict[str, bytes] = {}
    chain: bytes | None = None
    replaced: list[str] = []
    for name, named in sorted(by_name.items()):
        if any(v["DeleteMarker"] for v in named):
            replaced.append(f"{where}{name} was deleted")
        latest = [v for v in named if v["IsLatest"] and not v["DeleteMarker"] and v.get("path")]
        if name == CHAIN_NAME:
            chain = read(latest[0]) if latest else None
        else:
            if len({v.get("xxh128") for v in named}) > 1:
                replaced.append(f"{where}{name} was replaced ({len(named)} versions of other bytes)")
            if latest:
                manifests[name] = read(latest[0])
    h = read_history(folder, manifests, chain)
    h.problems = replaced + h.problems
    if chain is not None and not h.problems:
        for version in by_name.get(CHAIN_NAME, []):
            if version["IsLatest"] or not version.get("path"):
                continue
            try:
                older = parse_chain(read(version))
            except ElementTree.ParseError:
                older = None
            if older is None or h.chain[:len(older)] != older:
                h.problems.append(f"{where}{CHAIN_NAME}: an earlier version ({len(older or [])} generations) is "
                                  f"no beginning of the current one: the chain was rewritten")
    if chain is None and not manifests:
        h.problems.append(f"{folder}: no ASC MHL history, though every file of the card is in the bucket")
        return h
    if generations is not None and len(h.chain) != generations:
        h.problems.append(f"{where}: {len(h.chain)} generation(s) in the chain, {len(manifests)} manifest(s); "
                          f"{generations} expected (one per run that added files)")
    for path, version in sorted(objects.items()):
        listed = h.listed.get(path)
        if listed is None:
            h.problems.append(f"{folder}{path} is in no generation of the card's history")
        elif listed[1] != version.get("xxh128"):
            h.problems.append(f"{folder}{path}: generation {listed[0]} lists xxh128 {listed[1]}, "
                              f"the object holds {version.get('xxh128')}")
    for path in sorted(set(h.listed) - set(objects)):
        h.problems.append(f"{folder}{path}: listed by generation {h.listed[path][0]}, no such object")
    if h.problems or ascmhl is None:
        return h
    # The folder as a client downloads it: the card's objects at their paths, and ascmhl/.
    tree = tempfile.mkdtemp(dir=downloads, prefix="folder.")
    for path, version in objects.items():
        target = os.path.join(tree, path)
        if any(part in ("", ".", "..") for part in path.split("/")) or not version.get("path"):
            h.problems.append(f"{folder}{path!r}: no path a download could make")
            return h
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.link(version["path"], target)
    os.makedirs(os.path.join(tree, "ascmhl"))
    for name, data in list(manifests.items()) + [(CHAIN_NAME, chain)]:
        with open(os.path.join(tree, "ascmhl", name), "wb") as out:
            out.write(data)
    for args in (["diff", tree], ["create", "-h", "xxh128", tree]):
        answer = subprocess.run([ascmhl, *args], capture_output=True, text=True, timeout=600)
        if answer.returncode != 0:
            said = " ".join((answer.stdout + " " + answer.stderr).split())[-400:]
            h.problems.append(f"ascmhl {args[0]} {folder}: exit {answer.returncode}: {said}")
    shutil.rmtree(tree, ignore_errors=True)
    if not h.problems:
        h.verified = len(h.chain)
    return h


def folder_history(client, bucket: str, folder: str) -> History:
    """The history of `folder` as the bucket holds it now (current versions), without ascmhl."""
    manifests: dict[str, bytes] = {}
    chain = None
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder + "ascmhl/"):
        for item in page.get("Contents", []):
            match = HISTORY_KEY.match(item["Key"])
            if not match or match["folder"] != folder:
                continue
            data = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            if match["name"] == CHAIN_NAME:
                chain = data
            else:
                manifests[match["name"]] = data
    return read_history(folder, manifests, chain)


def key_path(path: bytes) -> str:
    """A card path as the default template puts it in a key, for plain names (ASCII letters,
    digits, '_', '-', '.', '/')."""
    return urllib.parse.quote(os.fsdecode(path), safe="/")


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)
