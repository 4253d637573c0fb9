#!/usr/bin/env bash
# A Ceph RGW S3 endpoint on 127.0.0.1 (issue 51): a one-node Ceph cluster in DIR with one monitor,
# one OSD on memstore (in memory: no disk, loop device or kernel module) and a size-1 pool, and
# radosgw with the beast frontend; no manager daemon (S3 does not need one), no systemd. Debian
# 12's ceph-mon, ceph-osd, radosgw and ceph-common (16.2.15, Pacific), which scripts/deps.sh
# installs. About 13 s to a working endpoint and about 200 MB of RSS.
#
#   scripts/rgw.sh start DIR [BUCKET]  writes DIR/ceph.conf, starts the three daemons with their
#                                      data, logs and PIDs in DIR, creates the S3 user with
#                                      $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY (radosgw-admin),
#                                      waits until S3 answers (aws s3api list-buckets), creates
#                                      BUCKET (default "cards") and prints the endpoint
#   scripts/rgw.sh stop DIR            SIGTERM, then SIGKILL after 10 s, to the processes DIR/pids
#                                      names (and only those: each PID is checked to be a Ceph
#                                      daemon of DIR before it is signalled)
#   scripts/rgw.sh endpoint DIR        the S3 endpoint, http://127.0.0.1:PORT
#
# A failed start stops what it started. Every daemon runs in the foreground (-f) in a session of
# its own, so that DIR/pids holds its real PID and it outlives this script.
# env: VENV (default the repository's .venv: aws, python); RGW_MEMSTORE_BYTES, the OSD's memory for
# objects (default 1 GiB)
set -euo pipefail

venv=${VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv}

die() { echo "rgw.sh: $*" >&2; exit 1; }

free_ports() {  # free_ports N: N distinct ports free on 127.0.0.1 now
  "$venv/bin/python" - "$1" <<'EOF'
import socket, sys
ports = set()
while len(ports) < int(sys.argv[1]):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ports.add(s.getsockname()[1])
print(*ports)
EOF
}

# launch NAME COMMAND ARGS…: one daemon in the background in a session of its own, its output in
# DIR/log/NAME.out, its PID added to DIR/pids.
launch() {
  local name=$1
  shift
  setsid "$@" >"$dir/log/$name.out" 2>&1 </dev/null &
  echo "$name $!" >>"$dir/pids"
}

ceph_() { timeout 30 ceph -c "$dir/ceph.conf" "$@"; }
s3() { "$venv/bin/aws" --endpoint-url "$(cat "$dir/endpoint")" --region us-east-1 "$@"; }

alive() {  # alive NAME: the daemon NAME of DIR/pids still runs
  local pid
  pid=$(awk -v n="$1" '$1 == n { print $2 }' "$dir/pids")
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

start() {
  local bucket=${1:-cards} ports fsid i
  for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool; do
    command -v "$tool" >/dev/null || die "no $tool: run 'bash scripts/deps.sh' as root (make test does)"
  done
  [[ -x $venv/bin/aws && -x $venv/bin/python ]] || die "no aws or python in $venv; run 'make venv' first"
  [[ -n ${AWS_ACCESS_KEY_ID:-} && -n ${AWS_SECRET_ACCESS_KEY:-} ]] \
    || die "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the S3 user's keys"
  [[ ! -s $dir/pids ]] || die "$dir/pids exists: a cluster of DIR may be running ('rgw.sh stop $dir' first)"
  read -r -a ports < <(free_ports 2)
  ((${#ports[@]} == 2)) || die "could not find free ports on 127.0.0.1"
  fsid=$(cat /proc/sys/kernel/random/uuid)
  mkdir -p "$dir/mon" "$dir/osd" "$dir/run" "$dir/log" "$dir/rgw"
  : >"$dir/pids"
  # auth none: a test bed on loopback. With it, a client cannot reach the monitor until `ms mon
  # client mode = crc` (the default asks for the secure mode, which needs cephx). The addresses
  # keep every daemon on loopback; memstore keeps the OSD's data in its memory, RGW_MEMSTORE_BYTES
  # at most (default 1 GiB; full, the OSD stalls and RGW stops answering).
  cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:${ports[0]}
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
keyring = /dev/null
mon data = $dir/mon/\$id
osd data = $dir/osd/\$id
osd objectstore = memstore
memstore device bytes = ${RGW_MEMSTORE_BYTES:-1073741824}
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
osd max object name len = 460
osd max object namespace len = 64
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:${ports[1]}
rgw data = $dir/rgw
rgw dns name = 127.0.0.1
EOF
  echo "http://127.0.0.1:${ports[1]}" >"$dir/endpoint"
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:${ports[0]}]" "$dir/monmap" >/dev/null
  ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" >"$dir/log/mon-mkfs.out" 2>&1 \
    || { cat "$dir/log/mon-mkfs.out" >&2; die "ceph-mon --mkfs failed"; }
  launch mon ceph-mon -c "$dir/ceph.conf" -f -i a
  for ((i = 0; i < 120; i++)); do
    ceph_ --connect-timeout 2 mon stat >/dev/null 2>&1 && break
    alive mon || { tail -20 "$dir/log/mon.out" "$dir/log/mon.a.log" >&2 2>/dev/null; die "the monitor exited"; }
    sleep 0.25
  done
  ((i < 120)) || die "the monitor did not answer in 30 s (its log: $dir/log/mon.a.log)"
  ceph_ osd create >/dev/null
  mkdir -p "$dir/osd/0"
  ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs >"$dir/log/osd-mkfs.out" 2>&1 \
    || { cat "$dir/log/osd-mkfs.out" >&2; die "ceph-osd --mkfs failed"; }
  launch osd ceph-osd -c "$dir/ceph.conf" -f -i 0
  launch rgw radosgw -c "$dir/ceph.conf" -f -n client.rgw
  # The user: radosgw-admin writes it to the cluster, so it waits for the OSD.
  for ((i = 0; i < 240; i++)); do
    timeout 30 radosgw-admin -c "$dir/ceph.conf" user create --uid ingest --display-name ingest \
      --access-key "$AWS_ACCESS_KEY_ID" --secret-key "$AWS_SECRET_ACCESS_KEY" >"$dir/log/user.out" 2>&1 && break
    alive osd || { tail -20 "$dir/log/osd.0.log" >&2; die "the OSD exited"; }
    sleep 0.25
  done
  ((i < 240)) || { cat "$dir/log/user.out" >&2; die "radosgw-admin user create did not succeed in 60 s"; }
  for ((i = 0; i < 240; i++)); do
    s3 s3api list-buckets >/dev/null 2>&1 && break
    alive rgw || { tail -20 "$dir/log/rgw.out" "$dir/log/client.rgw.log" >&2 2>/dev/null; die "radosgw exited"; }
    sleep 0.25
  done
  ((i < 240)) || die "radosgw did not answer S3 in 60 s (its log: $dir/log/client.rgw.log)"
  s3 s3api head-bucket --bucket "$bucket" >/dev/null 2>&1 || s3 s3api create-bucket --bucket "$bucket" >/dev/null
  cat "$dir/endpoint"
}

stop() {
  local name pid alive
  [[ -f $dir/pids ]] || return 0
  ours() {  # ours PID: a Ceph daemon of DIR (the PID may have been reused since)
    [[ -r /proc/$1/cmdline ]] && tr '\0' ' ' </proc/"$1"/cmdline | grep -q "$dir/ceph.conf"
  }
  while read -r name pid; do
    if ours "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done <"$dir/pids"
  for _ in $(seq 50); do
    alive=0
    while read -r name pid; do ours "$pid" && alive=1; done <"$dir/pids"
    ((alive)) || break
    sleep 0.2
  done
  while read -r name pid; do
    if ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  done <"$dir/pids"
  rm -f "$dir/pids"
}

[[ $# -ge 2 ]] || die "usage: rgw.sh start DIR [BUCKET] | stop DIR | endpoint DIR"
command=$1 dir=$(realpath -m "$2")
case $command in
  start)
    mkdir -p "$dir"
    trap 'status=$?; ((status == 0)) || stop; exit $status' EXIT   # a failed start leaves nothing running
    start "${3:-}" ;;
  stop) stop ;;
  endpoint) cat "$dir/endpoint" ;;
  *) die "unknown command $command: start, stop or endpoint" ;;
esac
