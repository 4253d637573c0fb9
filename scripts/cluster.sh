#!/usr/bin/env bash
# A SeaweedFS cluster on 127.0.0.1, the fleet's test bed (issue 41): one master
# (-defaultReplication=010: every volume has a copy in another rack), three volume servers in
# three racks of one data centre, one filer, and two S3 gateways on that filer, so that two
# stations (or one station given both) write one bucket through two gateways.
#
#   scripts/cluster.sh start DIR [BUCKET]  starts the cluster with its data, logs, s3.json and
#                                          PIDs in DIR, waits until both gateways answer
#                                          (aws s3api list-buckets), creates BUCKET (default
#                                          "fleet"), checks that a conditional write holds
#                                          across the gateways (a key written through
#                                          gateway 1, written again with If-None-Match: *
#                                          through gateway 2, must be refused 412), and prints
#                                          the two endpoints, one a line
#   scripts/cluster.sh stop DIR            SIGTERM, then SIGKILL after 10 s, to the processes
#                                          DIR/pids names (and only those: each PID is checked
#                                          to be a weed of DIR before it is signalled)
#   scripts/cluster.sh endpoints DIR       the two gateways' endpoints, one a line
#
# One identity, the one weed.sh gives: $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY, every
# action. Each port is a free one whose gRPC twin (port + 10000) is free too, as in weed.sh.
# env: VENV (default the repository's .venv: weed, aws, python)
set -euo pipefail

venv=${VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv}

die() { echo "cluster.sh: $*" >&2; exit 1; }

# Seven free ports with free twins: master, volume 1-3, filer, gateway 1-2.
free_ports() {
  "$venv/bin/python" - "$1" <<'EOF'
import socket, sys
def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return s.getsockname()[1]
        except OSError:
            return None
ports = []
while len(ports) < int(sys.argv[1]):
    port = bindable(0)
    if port < 55535 and port not in ports and bindable(port + 10000):
        ports.append(port)
print(*ports)
EOF
}

# launch NAME ARGS…: one weed process in the background, in a session of its own (so that it
# outlives this script), its output in DIR/NAME.log, its PID added to DIR/pids.
launch() {
  local name=$1
  shift
  setsid "$venv/bin/weed" "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo "$name $!" >>"$dir/pids"
}

s3() {  # s3 ENDPOINT ARGS…: the venv's aws against one gateway
  local endpoint=$1
  shift
  "$venv/bin/aws" --endpoint-url "$endpoint" --region us-east-1 "$@"
}

wait_gateway() {  # wait_gateway ENDPOINT LOG: until it answers list-buckets, 90 s at most
  local i
  for ((i = 0; i < 360; i++)); do
    s3 "$1" s3api list-buckets >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  tail -20 "$2" >&2
  die "gateway $1 did not answer in 90 s (its log above)"
}

start() {
  local bucket=${1:-fleet} ports master probe i
  [[ -x $venv/bin/weed && -x $venv/bin/aws && -x $venv/bin/python ]] \
    || die "no weed, aws or python in $venv; run 'make venv' first"
  [[ -n ${AWS_ACCESS_KEY_ID:-} && -n ${AWS_SECRET_ACCESS_KEY:-} ]] \
    || die "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the gateways' identity"
  [[ ! -s $dir/pids ]] || die "$dir/pids exists: a cluster of DIR may be running ('cluster.sh stop $dir' first)"
  read -r -a ports < <(free_ports 7)
  ((${#ports[@]} == 7)) || die "could not find free ports on 127.0.0.1"
  mkdir -p "$dir/master" "$dir/filer" "$dir"/volume{1,2,3}
  (umask 077 && cat >"$dir/s3.json") <<EOF
{"identities": [{"name": "ingest", "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
EOF
  : >"$dir/pids"
  master=127.0.0.1:${ports[0]}
  # -peers=none: one master, no Raft quorum to wait for. 512 MB volumes and -max=50 per server,
  # so that a bucket gets its volumes at once (weed.sh says why).
  launch master master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="${ports[0]}" -mdir="$dir/master" \
    -peers=none -defaultReplication=010 -volumeSizeLimitMB=512 -telemetry=false
  for i in 1 2 3; do
    launch "volume$i" volume -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="${ports[i]}" -dir="$dir/volume$i" \
      -mserver="$master" -dataCenter=dc1 -rack="r$i" -max=50
  done
  launch filer filer -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="${ports[4]}" -master="$master" \
    -defaultStoreDir="$dir/filer"
  for i in 1 2; do
    launch "s3-$i" s3 -ip.bind=127.0.0.1 -port="${ports[4 + i]}" -filer="127.0.0.1:${ports[4]}" \
      -config="$dir/s3.json" -port.iceberg=0 -port.lance=0
    echo "http://127.0.0.1:${ports[4 + i]}" >>"$dir/endpoints.new"
  done
  mv "$dir/endpoints.new" "$dir/endpoints"
  mapfile -t gateways <"$dir/endpoints"
  wait_gateway "${gateways[0]}" "$dir/s3-1.log"
  wait_gateway "${gateways[1]}" "$dir/s3-2.log"
  s3 "${gateways[0]}" s3api head-bucket --bucket "$bucket" >/dev/null 2>&1 \
    || s3 "${gateways[0]}" s3api create-bucket --bucket "$bucket" >/dev/null
  # The self-check: conditional writes must hold across the gateways, or stations sharing a
  # bucket through them could replace each other's objects.
  probe=.cluster-check-$$-$RANDOM
  printf 'first\n' >"$dir/probe"
  s3 "${gateways[0]}" s3api put-object --bucket "$bucket" --key "$probe" --body "$dir/probe" >/dev/null
  if s3 "${gateways[1]}" s3api put-object --bucket "$bucket" --key "$probe" --body "$dir/probe" \
       --if-none-match '*' >/dev/null 2>"$dir/probe.err"; then
    die "a PUT with If-None-Match: * through gateway 2 of a key written through gateway 1 was not refused: conditional writes do not hold across the gateways"
  fi
  grep -q "PreconditionFailed\|412" "$dir/probe.err" \
    || die "the conditional PUT through gateway 2 failed, but not with 412: $(tail -1 "$dir/probe.err")"
  s3 "${gateways[0]}" s3api delete-object --bucket "$bucket" --key "$probe" >/dev/null
  rm -f "$dir/probe" "$dir/probe.err"
  printf '%s\n' "${gateways[@]}"
}

stop() {
  local name pid
  [[ -f $dir/pids ]] || return 0
  while read -r name pid; do
    # Only a weed of this DIR: the PID may have been reused since.
    if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' </proc/"$pid"/cmdline | grep -q "weed.*$dir"; then
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done <"$dir/pids"
  for _ in $(seq 50); do
    local alive=0
    while read -r name pid; do kill -0 "$pid" 2>/dev/null && alive=1; done <"$dir/pids"
    ((alive)) || break
    sleep 0.2
  done
  while read -r name pid; do
    if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' </proc/"$pid"/cmdline | grep -q "weed.*$dir"; then
      kill -KILL "$pid" 2>/dev/null || true   # weed can take long to stop
    fi
  done <"$dir/pids"
  rm -f "$dir/pids"
}

[[ $# -ge 2 ]] || die "usage: cluster.sh start DIR [BUCKET] | stop DIR | endpoints DIR"
command=$1 dir=$(realpath -m "$2")
case $command in
  start)
    mkdir -p "$dir"
    trap 'status=$?; ((status == 0)) || stop; exit $status' EXIT   # a failed start leaves nothing running
    start "${3:-}" ;;
  stop) stop ;;
  endpoints) cat "$dir/endpoints" ;;
  *) die "unknown command $command: start, stop or endpoints" ;;
esac
