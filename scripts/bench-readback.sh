#!/usr/bin/env bash
# Reading a card's objects back: `ingest verify-card --read-back` (the card read again, each
# object's HEAD, then its bytes in ranged GETs, fingerprinted) against `aws s3 cp --recursive`
# of the same objects into /dev/shm, and `ingest verify-card` without --read-back (the card
# and the HEADs alone), on one SeaweedFS on 127.0.0.1, in the same run, rounds rotated.
#
#   INGEST=.build/release/ingest FILES=8 SIZE=128M REPEAT=3 bash scripts/bench-readback.sh
#
# The card is FILES random files of SIZE in /dev/shm, ingested once; SeaweedFS keeps its data
# on the disk (in the page cache after the first read, for every contender alike).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$root/.build/release/ingest}
venv=${VENV:-$root/.venv}
FILES=${FILES:-8} SIZE=${SIZE:-128M} REPEAT=${REPEAT:-3}
export AWS_ACCESS_KEY_ID=bench-readback AWS_SECRET_ACCESS_KEY=bench-readback-secret AWS_DEFAULT_REGION=us-east-1
export VENV=$venv
aws=$venv/bin/aws
[[ -x $ingest ]] || { echo "bench: no $ingest; run 'make release' first" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench: no /usr/bin/time (GNU time); run 'make deps'" >&2; exit 1; }
# shellcheck source=scripts/weed.sh
source "$root/scripts/weed.sh"

card=$(mktemp -d /dev/shm/bench-readback-card.XXXXXX)
server=$(mktemp -d "${TMPDIR:-/tmp}/bench-readback-server.XXXXXX")
state=$(mktemp -d "${TMPDIR:-/tmp}/bench-readback-state.XXXXXX")
download=/dev/shm/bench-readback-download.$$
cleanup() { weed_stop || true; rm -rf "$card" "$server" "$state" "$download"; }
trap cleanup EXIT

weed_start "$server" && weed_wait
for ((i = 1; i <= FILES; i++)); do head -c "$SIZE" /dev/urandom >"$card/CLIP_$(printf %04d "$i").MP4"; done
bytes=$(find "$card" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
bucket=readback
weed_s3 s3api create-bucket --bucket "$bucket" >/dev/null
INGEST_CONFIG=/dev/null "$ingest" "$card" --endpoint "$weed_endpoint" --bucket "$bucket" --state-dir "$state" \
  --json >"$server/ingest.log" 2>&1 || { tail -5 "$server/ingest.log" >&2; exit 1; }

declare -A wall=() cpu=() rss=()
export ingest card state aws bucket download weed_endpoint
# shellcheck disable=SC2016  # expanded by the bash that run starts
declare -A command=(
  [read-back]='INGEST_CONFIG=/dev/null exec "$ingest" verify-card "$card" --read-back --state-dir "$state" --no-progress --json'
  [labels]='INGEST_CONFIG=/dev/null exec "$ingest" verify-card "$card" --state-dir "$state" --no-progress --json'
  [aws]='rm -rf "$download"; exec "$aws" --endpoint-url "$weed_endpoint" s3 cp --recursive "s3://$bucket/" "$download" --only-show-errors'
)
# run NAME: one timed run of command[NAME]; appends to wall, cpu (user+sys) and rss (KiB, highest).
run() {
  local name=$1 e u s m
  /usr/bin/time -o "$server/$name.time" -f '%e %U %S %M' bash -c "${command[$name]}" >"$server/$name.log" 2>&1 \
    || { echo "bench: $name failed:" >&2; tail -5 "$server/$name.log" >&2; exit 1; }
  read -r e u s m <"$server/$name.time"
  wall[$name]+="$e " cpu[$name]+="$(awk "BEGIN {print $u + $s}") "
  ((m > ${rss[$name]:-0})) && rss[$name]=$m
  return 0
}

names=(read-back aws labels)
for ((round = 0; round < REPEAT; round++)); do
  for ((k = 0; k < ${#names[@]}; k++)); do
    name=${names[(k + round) % ${#names[@]}]}
    case $name in
      read-back) run read-back
        grep -q "\"read_back_bytes\":$bytes" "$server/read-back.log" \
          || { echo "bench: verify-card --read-back did not read every byte back" >&2; tail -3 "$server/read-back.log" >&2; exit 1; } ;;
      aws) run aws
        [[ $(du -cb "$download" | tail -1 | cut -f1) -ge $bytes ]] || { echo "bench: aws did not download the card" >&2; exit 1; }
        rm -rf "$download" ;;
      labels) run labels ;;
    esac
  done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
mib=$(awk "BEGIN {print $bytes / 1048576}")
printf '%s files of %s (%s MiB), %s rounds, medians\n' "$FILES" "$SIZE" "$mib" "$REPEAT"
printf '| contender | wall s (each run) | MiB/s | CPU s | peak RSS MiB |\n|---|--:|--:|--:|--:|\n'
for name in read-back aws labels; do
  w=$(median "${wall[$name]}")
  label=$([[ $name == read-back ]] && echo "ingest verify-card --read-back" \
    || { [[ $name == aws ]] && echo "aws s3 cp --recursive (to /dev/shm)"; } || echo "ingest verify-card (no read-back)")
  printf '| %s | %s (%s) | %.0f | %s | %.0f |\n' "$label" "$w" "${wall[$name]% }" "$(awk "BEGIN {print $mib / $w}")" \
    "$(median "${cpu[$name]}")" "$(awk "BEGIN {print ${rss[$name]} / 1024}")"
done
r=$(median "${wall[read-back]}") a=$(median "${wall[aws]}") l=$(median "${wall[labels]}")
printf 'verify-card --read-back wall / aws s3 cp wall: %.2f; read-back alone (its wall minus the check without it): %.0f MiB/s\n' \
  "$(awk "BEGIN {print $r / $a}")" "$(awk "BEGIN {d = $r - $l; print (d > 0 ? $mib / d : 0)}")"
