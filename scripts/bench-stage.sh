#!/usr/bin/env bash
# BENCHMARK (not a test): staging throughput and peak RSS of `ingest PATH --no-upload`
# against `cp -r`, `cp -r` + sync (ingest makes every copy durable, cp does not), and the
# two-pass way, `cp -r` then xxh128sum over the copy: from the page cache (without and with
# sync), and read back from disk after a sync and a cache drop, as when a card is larger
# than the station's memory. All on the same data in one run. Each contender runs REPEAT times, interleaved, with cold data caches (programs
# warm: ingest's cold start, ~0.2 s of Swift runtime paging in, is not staging); medians shown.
# Data: a card of FILES photos (1–8 MiB) plus one BIG file, on an ext4 loop mount when root.
#   env: BIG (default 1G; BIG=4G shows peak RSS stays flat), FILES (200), REPEAT (3),
#        SETTLE (seconds between runs, 3), WORK (default out/bench-stage: card image and
#        destinations, one file system), INGEST (binary)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest}
big=${BIG:-1G} files=${FILES:-200} repeat=${REPEAT:-3} max_mib=8
work=${WORK:-$repo/out/bench-stage}
[[ -x $ingest ]] || { echo "bench: no $ingest; run 'make release' first" >&2; exit 1; }

source "$repo/scripts/loop-card.sh"   # card_mount, card_release
cleanup() {
  set +e
  card_release
  rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$work" && mkdir -p "$work/card" "$work/dst"
card=$work/card dst=$work/dst

echo "== Making the data set: $files photos of 1–$max_mib MiB and one $big file"
if ((EUID == 0)); then
  b=${big%B}
  data=$(($(numfmt --from=iec "${b%i}") + (files + 1) * max_mib * 1048576))
  card_mount "$work/card.img" "$card" "$data" BENCH_CARD --direct-io=on || true
fi
bash "$repo/scripts/make-card.sh" "$card" --big "$big" --photos "$files" --max-mib "$max_mib" >/dev/null
[[ -n $card_mnt ]] && mount -o remount,ro "$card"
bytes=$(find "$card" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}')
echo "card: ${card_loopdev:-plain directory} on $card, $(numfmt --to=iec "$bytes") in regular files"
echo "destination: $dst ($(findmnt -no SOURCE,FSTYPE -T "$dst")); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
((EUID == 0)) || echo "bench: WARNING: not root, cannot drop page caches: reads may come from memory" >&2

# The contenders: each a shell command reading $card and writing into $out (fresh, empty).
names=(ingest cp cp+sync cp+xxh128sum cp+xxh128sum+sync cp+sync+cold-xxh128sum ingest-no-big)
# shellcheck disable=SC2016  # expanded by the bash that runs each
declare -A cmd=(
  [ingest]='"$ingest" "$card" --no-upload --state-dir "$out" --json >"$work/ingest.ndjson"'
  [cp]='cp -r "$card" "$out/card"'
  [cp+sync]='cp -r "$card" "$out/card" && sync'
  [cp+xxh128sum]='cp -r "$card" "$out/card" && find "$out/card" -type f -print0 | xargs -0 xxh128sum >/dev/null 2>&1'
  [cp+xxh128sum+sync]='cp -r "$card" "$out/card" && find "$out/card" -type f -print0 | xargs -0 xxh128sum >/dev/null 2>&1 && sync'
  [cp+sync+cold-xxh128sum]='cp -r "$card" "$out/card" && sync && { ((EUID != 0)) || echo 3 >/proc/sys/vm/drop_caches; } && find "$out/card" -type f -print0 | xargs -0 xxh128sum >/dev/null 2>&1'
  [ingest-no-big]='"$ingest" "$card" --no-upload --state-dir "$out" --exclude "*.MP4" >/dev/null 2>&1'
)
declare -A secs rss cpu
calc() { awk "BEGIN {print $1}"; }
export ingest card work
for ((r = 1; r <= repeat; r++)); do
  for ((i = 0; i < ${#names[@]}; i++)); do
    name=${names[(i + r - 1) % ${#names[@]}]}              # rotate: no contender always goes first
    [[ $name == ingest-no-big && $r -gt 1 ]] && continue   # one run is enough for its RSS
    out=$dst/$name && rm -rf "$out" && mkdir -p "$out"
    # Cold caches; then wait: on a VM whose balloon reports free pages to the host (like this
    # one), memory freed moments ago is cheaper to reuse than memory freed seconds ago, so without
    # the wait each contender's speed depends on how much page cache the previous one left.
    sync && { ((EUID != 0)) || echo 3 >/proc/sys/vm/drop_caches; } && sleep "${SETTLE:-3}"
    for prog in "$ingest" cp xxh128sum; do "$prog" --version >/dev/null 2>&1; done  # warm programs
    out=$out /usr/bin/time -f '%e %M %U %S' -o "$work/time" bash -c "${cmd[$name]}" \
      || { echo "bench: $name failed" >&2; exit 1; }
    read -r e m u s <"$work/time"
    secs[$name]+="$e " cpu[$name]+="$(calc "$u + $s") " rss[$name]=$((m > ${rss[$name]:-0} ? m : ${rss[$name]:-0}))
    printf '  run %d/%d  %-18s %7.2f s  %6d MiB\n' "$r" "$repeat" "$name" "$e" $((m / 1024))
    if [[ $name == ingest ]] && ! grep -q '"event":"summary".*"failed":0,' "$work/ingest.ndjson"; then
      echo "bench: ingest reported failures:" >&2; grep -v '"staged"' "$work/ingest.ndjson" >&2; exit 1
    fi
    rm -rf "$out"
  done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo
echo "== Staging $(numfmt --to=iec "$bytes") ($files photos + $big), median of $repeat cold-cache runs"
printf '%-20s %9s %9s %9s %14s\n' contender seconds MB/s "CPU s" "peak RSS MiB"
declare -A med
for name in "${names[@]:0:6}"; do
  med[$name]=$(median "${secs[$name]}")
  printf '%-20s %9.2f %9.0f %9.2f %14d\n' "$name" "${med[$name]}" \
    "$(calc "$bytes / 1e6 / ${med[$name]}")" "$(median "${cpu[$name]}")" $((${rss[$name]} / 1024))
done
echo "(CPU s: user+sys of the contender's processes; kernel flusher threads writing cp's dirty pages are not counted)"
echo
echo "Throughput ratios (higher is better for ingest):"
for base in cp cp+sync cp+xxh128sum cp+xxh128sum+sync cp+sync+cold-xxh128sum; do
  printf '  %-28s %5.2f\n' "ingest / ($base)" "$(calc "${med[$base]} / ${med[ingest]}")"
done
echo
echo "ingest peak RSS: $((rss[ingest] / 1024)) MiB with the $big file," \
  "$((${rss[ingest-no-big]} / 1024)) MiB on the same card without it (--exclude '*.MP4')"
