"""Infrastructure for scripts/faults.py: SeaweedFS, the fault proxy, cards, the ingest binary
and the oracle that counts what landed in a bucket by downloading it.

Everything runs on 127.0.0.1; every process started here is remembered by its PID and
stopped by it (never by name); every loop device and mount made here is undone on exit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import urllib.request
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
        session = botocore.session.get_session()
        return session.create_client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id=self.admin[0], aws_secret_access_key=self.admin[1],
            config=botocore.config.Config(
                s3={"addressing_style": "path"}, retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=timeout, read_timeout=max(timeout, 30)))


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

    def stop(self) -> None:
        stop_process(self.process, 5)
        CLEANUP.remove(self.stop)


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
                 known: list[CardFile] = (), forbidden: list[CardFile] = ()) -> Count:
    """Downloads every version of every object under `prefix` and counts against the card files
    (`files`: expected in the bucket; `known`: on a card, but not expected; `forbidden`: the
    host's files, off the card, each of which in the bucket counts as corrupt and is named)."""
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
    downloads = tempfile.mkdtemp(dir=work, prefix="download.")
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
        readable.append(version)
        paths.append(os.fsencode(path))
    hashes = hash_files(paths)
    shutil.rmtree(downloads, ignore_errors=True)
    for version, digest, recorded in zip(readable, hashes, meta):
        version["xxh128"] = digest
        version["recorded"] = recorded
    expected_hashes = {f.xxh128 for f in files} | {f.xxh128 for f in known}
    count.versions = len(real)
    current = [v for v in versions if v["IsLatest"] and not v["DeleteMarker"]]
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
        by_key.setdefault(version["Key"], set()).add("deleted" if version["DeleteMarker"] else version["xxh128"])
    for key, contents in by_key.items():
        if len(contents) > 1:
            count.replaced += 1
            count.notes.append(f"replaced {key!r}")
    count.duplicates = len(current_hashes) - len(present)
    if count.duplicates:
        seen: dict[str, str] = {}
        for v in current:
            if v["xxh128"] in seen:
                count.notes.append(f"duplicate {v['Key']!r} = {seen[v['xxh128']]!r}")
            else:
                seen[v["xxh128"]] = v["Key"]
    host = {f.xxh128: f for f in forbidden}
    for version in readable:
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
    uploads = client.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
    count.open_uploads = len(uploads)
    for upload in uploads:
        count.notes.append(f"open multipart upload {upload.get('UploadId', '')[:12]}… of {upload['Key']!r}")
    distinct: dict[str, int] = {f.xxh128: f.size for f in files}
    count.needed_bytes = sum(distinct.values())
    return count


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)
