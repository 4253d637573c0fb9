#!/usr/bin/env bash
# BENCHMARK (not a test): what one PUT costs the server, by the headers it carries. A client
# of its own (Python, keep-alive, SigV4) sends COUNT (3,000) PUTs of 20 kB over 4 connections
# for each set of headers, ROUNDS (5) rounds in shuffled order, each round into a fresh bucket
# after 500 PUTs to warm it, to one SeaweedFS on 127.0.0.1; SeaweedFS's user+sys CPU time is
# read from /proc before and after each set. The sets:
#   s5cmd   what s5cmd 2.3 sends: Content-MD5 and the body's signed SHA-256
#   crc     UNSIGNED-PAYLOAD and x-amz-checksum-crc32c (ingest's part integrity)
#   meta    UNSIGNED-PAYLOAD and ingest's three x-amz-meta-* headers
#   deep    UNSIGNED-PAYLOAD, under a key as deep as ingest's (station/date/card/…)
#   inm     UNSIGNED-PAYLOAD and If-None-Match: * (ingest's write that replaces nothing)
#   ingest  all of ingest's: the deep key, CRC32C, metadata and If-None-Match
# It prints each set's mean server CPU per PUT, and each round's. Run: bash scripts/bench-put-headers.sh
#   env: COUNT, ROUNDS, WORK (default out/bench-put-headers), VENV (default .venv: weed, aws)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VENV:-$repo/.venv} ingest=${INGEST:-$repo/.build/release/ingest}
count=${COUNT:-3000} rounds=${ROUNDS:-5}
work=${WORK:-$repo/out/bench-put-headers}
VENV=$venv source "$repo/scripts/weed.sh"   # weed_start, weed_wait, weed_stop, weed_s3
source "$repo/scripts/bench-s3.sh"           # bench_server, die

trap 'weed_stop' EXIT
rm -rf "$work" && mkdir -p "$work/weed"
bench_server "$work/weed"
results=$work/results
for ((round = 1; round <= rounds; round++)); do
  bucket=headers-$round
  weed_s3 s3api create-bucket --bucket "$bucket" >/dev/null
  sets=$(printf '%s\n' s5cmd crc meta deep inm ingest | shuf | tr '\n' ' ')
  echo "round $round/$rounds: $sets"
  "$bench_py" - "$endpoint" "$bucket" "$weed_pid" 500 warm >/dev/null <"$repo/scripts/put-cost.py"
  for set in $sets; do "$bench_py" - "$endpoint" "$bucket" "$weed_pid" "$count" "$set" <"$repo/scripts/put-cost.py"; done \
    | tee -a "$results"
done
echo
echo "Server CPU per PUT of 20 kB, mean of $rounds rounds of $count ($(nproc) cores; $("$venv/bin/weed" version 2>/dev/null | head -1)):"
awk '{sum[$1] += $2; n[$1]++; all[$1] = all[$1] " " $2} END {for (s in sum) printf "  %-7s %.3f ms   (%s )\n", s, sum[s] / n[s], all[s]}' \
  "$results" | sort -k2 -n
