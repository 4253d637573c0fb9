#!/usr/bin/env bash
# BENCHMARK (not a test): one station, four cards at once, one `[upload] max_rate` for the
# station (issue 41). One SeaweedFS on 127.0.0.1; CARDS (4) card directories, each 1 × BIG
# (300M) + 20 × 4 MiB of random data in CARD_DIR (/dev/shm); CARDS ingest processes started
# together, each with its own --state-dir, one config with max_rate = RATE (40MiB/s), each
# into its own bucket. The station's upload rate is the slope of the server's received bytes
# (SeaweedFS_s3_bucket_traffic_received_bytes_total, all buckets), sampled every second, over
# the time all of them upload: from SKIP seconds after the first bytes land to the first
# process's exit (SKIP, 6 s: the server counts a request's bytes when it ends, which blurs a
# slope by the parts in flight at its ends); and all the bytes over the whole run, a lower bound. Run twice: "shared", every process with the same INGEST_RATE_FILE (the
# station's bucket), and "per-process" (INGEST_RATE_FILE in a directory that does not exist:
# each process falls back to its own bucket). Target: shared within 10 % of RATE.
#   env: INGEST (binary, default .build/release/ingest), VENV, CARDS, BIG, RATE, SKIP, CARD_DIR,
#        WORK (default /var/tmp/bench-station-rate: SeaweedFS data and the state directories),
#        MODES (default "shared per-process")
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest}
cards=${CARDS:-4} big=${BIG:-300M} rate=${RATE:-40MiB/s} skip=${SKIP:-6}
card_dir=${CARD_DIR:-/dev/shm}/bench-station-rate-cards
work=${WORK:-/var/tmp/bench-station-rate}
read -r -a modes <<<"${MODES:-shared per-process}"
export VENV=${VENV:-$repo/.venv}
source "$repo/scripts/weed.sh"
export AWS_ACCESS_KEY_ID=bench-access AWS_SECRET_ACCESS_KEY=bench-secret-$SRANDOM$SRANDOM
export AWS_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  weed_stop || true
  rm -rf "$card_dir"
}
trap cleanup EXIT

rm -rf "$work" "$card_dir" && mkdir -p "$work/weed" "$card_dir"
echo "== Making $cards cards of 1 × $big + 20 × 4 MiB in $card_dir"
for c in $(seq 1 "$cards"); do
  mkdir -p "$card_dir/card$c/DCIM/100MEDIA"
  head -c "$big" /dev/urandom >"$card_dir/card$c/DCIM/100MEDIA/C$c-0000.MP4"
  for i in $(seq 1 20); do head -c 4M /dev/urandom >"$card_dir/card$c/DCIM/100MEDIA/C$c-$i.JPG"; done
done
card_bytes=$(du -sb "$card_dir/card1" | cut -f1)

weed_start "$work/weed" "$work/weed/weed.log" bench
weed_wait 60 || exit 1
echo "SeaweedFS on $weed_endpoint; $(nproc) cores; $("$ingest" --version 2>&1)"

received() {   # the server's received bytes, all buckets
  curl -s "$weed_metrics" | awk '/^SeaweedFS_s3_bucket_traffic_received_bytes_total/ { s += $2 } END { printf "%.0f\n", s }'
}

declare -A result
for mode in "${modes[@]}"; do
  rate_file=$work/$mode/upload-rate
  [[ $mode == shared ]] || rate_file=$work/$mode/no-such-directory/upload-rate
  mkdir -p "$work/$mode"
  printf '[upload]\nmax_rate = "%s"\n' "$rate" >"$work/$mode/ingest.toml"
  for c in $(seq 1 "$cards"); do weed_s3 s3api create-bucket --bucket "$mode-card$c" >/dev/null; done
  echo "== $mode: $cards processes, max_rate = $rate, INGEST_RATE_FILE=$rate_file"
  base=$(received) pids=() start=$(date +%s.%N)
  for c in $(seq 1 "$cards"); do
    INGEST_CONFIG=$work/$mode/ingest.toml INGEST_RATE_FILE=$rate_file \
      "$ingest" "$card_dir/card$c" --endpoint "$weed_endpoint" --bucket "$mode-card$c" \
      --state-dir "$work/$mode/state$c" --json >"$work/$mode/card$c.log" 2>&1 &
    pids+=($!)
  done
  samples=() first_exit=""
  while :; do
    now=$(date +%s.%N) bytes=$(($(received) - base))
    samples+=("$now $bytes")
    running=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=$((running + 1)); done
    [[ -n $first_exit ]] || ((running == cards)) || first_exit=$now
    ((running > 0)) || break
    sleep 1
  done
  end=$(date +%s.%N)
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  pids=()
  ((status == 0)) || { echo "an ingest exited $status; see $work/$mode/card*.log" >&2; exit 1; }
  total=$(($(received) - base))
  ((total >= cards * card_bytes)) || { echo "only $total bytes reached the server, not $((cards * card_bytes))" >&2; exit 1; }
  # The slope of received bytes while every process was uploading.
  read -r t0 b0 t1 b1 < <(printf '%s\n' "${samples[@]}" | awk -v skip="$skip" -v stop="$first_exit" '
    $2 > 0 && !t0 { t0 = $1 + skip } t0 && !a && $1 >= t0 { a = $1; ab = $2 } $1 <= stop { z = $1; zb = $2 }
    END { print a, ab, z, zb }')
  station=$(awk -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%.1f", (b1 - b0) / (t1 - t0) / 1048576 }')
  printf '%s\n' "${samples[@]}" >"$work/$mode/samples.txt"
  # All the bytes over the whole run, start-up and staging included: a lower bound of the
  # rate while they upload (a slope is blurred by the parts in flight at its two ends: the
  # server counts a request's bytes when it ends).
  overall=$(awk -v total="$total" -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", total / (b - a) / 1048576 }')
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  window=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  result[$mode]="| $mode | $cards | $rate | $station | $overall | $window | $wall | $(numfmt --to=iec "$total") |"
  echo "${result[$mode]}"
done

echo
echo "| bucket | processes | max_rate each | MiB/s landed while all upload (slope) | MiB/s landed over the whole run (lower bound) | window s | wall s | bytes landed |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|"
for mode in "${modes[@]}"; do echo "${result[$mode]}"; done
