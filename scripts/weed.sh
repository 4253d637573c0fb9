# shellcheck shell=bash
# Sourced, not run: a SeaweedFS S3 server (`weed server -s3`, from the project's venv) on free
# 127.0.0.1 ports, for the demo and the benchmarks; stopped by its PID, never by name.
#
#   source scripts/weed.sh
#   weed_start DIR [LOG [NAME]]  writes DIR/s3.json, one identity NAME (default "ingest") with
#                                $AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY and every action,
#                                and starts weed in the background with its data in DIR/data and
#                                its output in LOG (default DIR/weed.log). Sets weed_pid,
#                                weed_endpoint (http://127.0.0.1:PORT), weed_s3_port, weed_log, and
#                                weed_metrics (the URL of its Prometheus metrics).
#                                Call it in the script's own shell (not in $(…)): weed_stop waits for it.
#   weed_wait [SECONDS]          returns once the S3 API answers (aws s3api list-buckets with the
#                                same credentials), default 60 s; 1 with the log's tail on stderr
#                                if weed exits or does not answer in time
#   weed_stop                    SIGTERM, SIGKILL after 10 s: only the weed weed_start started
#   weed_s3 ARGS…                the venv's aws against this server (--endpoint-url, --region us-east-1)
#   weed_requests                the S3 requests the server has answered so far, by type (its
#                                metric SeaweedFS_s3_request_total): lines "TYPE COUNT"
#   env: VENV (default the repository's .venv: weed, aws, python)

weed_venv=${VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv}
weed_pid="" weed_endpoint="" weed_s3_port="" weed_log="" weed_metrics=""

weed_start() {
  local dir=$1 name=${3:-ingest} ports
  weed_log=${2:-$dir/weed.log}
  [[ -x $weed_venv/bin/weed && -x $weed_venv/bin/aws && -x $weed_venv/bin/python ]] \
    || { echo "weed.sh: no weed, aws or python in $weed_venv; run 'make venv' first" >&2; return 1; }
  [[ -n ${AWS_ACCESS_KEY_ID:-} && -n ${AWS_SECRET_ACCESS_KEY:-} ]] \
    || { echo "weed.sh: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the server's identity" >&2; return 1; }
  # Five free ports whose gRPC twins (port + 10000) are free too: master, volume, filer, S3, metrics.
  read -r -a ports < <("$weed_venv/bin/python" - <<'EOF'
import socket
def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return s.getsockname()[1]
        except OSError:
            return None
ports = []
while len(ports) < 5:
    port = bindable(0)
    if port < 55535 and port not in ports and bindable(port + 10000):
        ports.append(port)
print(*ports)
EOF
)
  ((${#ports[@]} == 5)) || { echo "weed.sh: could not find free ports on 127.0.0.1" >&2; return 1; }
  weed_s3_port=${ports[3]} weed_endpoint=http://127.0.0.1:${ports[3]} weed_metrics=http://127.0.0.1:${ports[4]}/metrics
  mkdir -p "$dir/data" || return 1
  (umask 077 && cat >"$dir/s3.json") <<EOF || return 1
{"identities": [{"name": "$name", "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
EOF
  # Iceberg and Lance side servers off (they take fixed ports); volume limits raised so that new
  # buckets get volumes at once (the default -volume.max=8 runs out after a bucket or two).
  "$weed_venv/bin/weed" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port="${ports[0]}" -volume.port="${ports[1]}" -filer.port="${ports[2]}" \
    -s3 -s3.port="$weed_s3_port" -s3.config="$dir/s3.json" \
    -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false -metricsPort="${ports[4]}" \
    -master.volumeSizeLimitMB=512 -volume.max=100 >"$weed_log" 2>&1 &
  weed_pid=$!
  return 0
}

weed_s3() { "$weed_venv/bin/aws" --endpoint-url "$weed_endpoint" --region us-east-1 "$@"; }

weed_requests() {
  "$weed_venv/bin/python" - "$weed_metrics" <<'EOF'
import collections, re, sys, urllib.request
counts = collections.Counter()
for line in urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().splitlines():
    match = re.match(r'SeaweedFS_s3_request_total\{.*type="([A-Z]+)".*\} (\S+)$', line)
    if match:
        counts[match.group(1)] += int(float(match.group(2)))
for kind, count in sorted(counts.items()):
    print(kind, count)
EOF
}

weed_wait() {
  local tries=$((${1:-60} * 4)) i
  for ((i = 0; ; i++)); do
    weed_s3 s3api list-buckets >/dev/null 2>&1 && return 0
    if [[ -z $weed_pid ]] || ! kill -0 "$weed_pid" 2>/dev/null || ((i >= tries)); then
      tail -20 "$weed_log" >&2
      return 1
    fi
    sleep 0.25
  done
}

weed_stop() {  # safe under set -e: weed's own exit status (143, 137) is not a failure here
  if [[ -n $weed_pid ]] && kill -0 "$weed_pid" 2>/dev/null; then
    kill -TERM "$weed_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$weed_pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$weed_pid" 2>/dev/null; then kill -KILL "$weed_pid" 2>/dev/null || true; fi   # weed can take long to stop
    wait "$weed_pid" 2>/dev/null || true
  fi
  weed_pid=""
  return 0
}
