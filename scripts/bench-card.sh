#!/usr/bin/env bash
# BENCHMARK (not a test): a card read at a card's speed. Each layout is made as an ext4 image on
# a loop device, mounted read-only, its reads throttled to CARD_MBPS in a cgroup of this bench's
# own (v1 blkio.throttle.read_bps_device, or v2 io.max), and every contender runs inside that
# cgroup with a cold page cache: one plain read of every file (what the card allows), then
# `ingest --no-upload`, `ingest`, `aws s3 cp --recursive`, `rclone copy` and `s5cmd cp`, each
# uploading into a fresh bucket of one SeaweedFS on 127.0.0.1 (not throttled: only the card is).
# Printed for each layout: each contender's wall time and its ratio to the plain read, CPU
# (user+sys), peak RSS; then the ratios of every layout side by side. Every bucket is listed
# after its run: a contender that uploaded less than the card fails the bench.
# Target (issue 14): ingest ≤ 1.02× the plain read, and ahead of aws, on every layout; (issue 36)
# the card's ASC MHL history (mhl_seconds of its summary) at most 1 % of its wall time.
# Root only: loop devices, cgroups, drop_caches.
#
# Layouts (sizes × SCALE; file names sort as named):
#   big-last   200 × 4 MiB photos + one 1 GiB video that sorts last
#   big-first  the same, the video sorting first
#   one-4g     one 4 GiB video
#   mixed      3,000 × 300 kB + 200 × 4 MiB, in DCF folders of at most 1,000 files
#   env: LAYOUTS (default "big-last big-first one-4g mixed"), CARD_MBPS (90: a UHS-I card),
#        SCALE (1, about 20 minutes on 2 cores; 0.1 for a quick run), CONTENDERS (default "read ingest-no-upload ingest aws
#        rclone s5cmd"; read always runs: it is the reference; add ingest-base with BASELINE=path
#        to another build for an A/B in one run), REPEAT (1), SETTLE (seconds
#        between runs, 3), TIMEOUT (seconds a run, 1800), WORK (default out/bench-card, not
#        tmpfs), CARD_DIR (where the card's image lives: default /dev/shm when it has room, see
#        below), INGEST (binary), VENV (default .venv: weed, aws, s5cmd)
#
# The card's image lives apart from WORK's disk, in memory (/dev/shm) when there is room: a real
# card is a device of its own, whose reads nothing else on the station slows. An image on the
# disk that also takes the staged copies and the server's writes makes the card's reads wait
# behind those writes (measured on one-4g: the card read by ingest 0.4 to 0.9 s slower than its
# 47.7 s, the plain read, which writes nothing, never), charging every uploader for a contention
# no card reader has. The throttle still sets the card's speed, and the loop device reads its
# image directly (no second page cache), so a cold cache stays cold.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest} ingest_base=${BASELINE:-}
venv=${VENV:-$repo/.venv}
mbps=${CARD_MBPS:-90} scale=${SCALE:-1} repeat=${REPEAT:-1} settle=${SETTLE:-3} timeout=${TIMEOUT:-1800}
read -r -a layouts <<<"${LAYOUTS:-big-last big-first one-4g mixed}"
read -r -a names <<<"${CONTENDERS:-read ingest-no-upload ingest aws rclone s5cmd}"
work=${WORK:-$repo/out/bench-card}
VENV=$venv source "$repo/scripts/weed.sh"   # weed_start, weed_wait, weed_stop, weed_s3
source "$repo/scripts/bench-s3.sh"           # the contenders, bench_run, bench_check…
source "$repo/scripts/loop-card.sh"          # card_mount, card_release

((EUID == 0)) || die "run as root: the card is a loop device, throttled in a cgroup, read with the page cache dropped"
[[ " ${names[*]} " == *" read "* ]] || names=(read "${names[@]}")
bench_tools "${names[@]}"
for layout in "${layouts[@]}"; do
  [[ $layout == @(big-last|big-first|one-4g|mixed) ]] || die "LAYOUTS: unknown '$layout' (big-last big-first one-4g mixed)"
done
[[ $mbps =~ ^[1-9][0-9]*$ ]] || die "CARD_MBPS=$mbps: a whole number of MB/s"
bps=$((mbps * 1000000))

# The throttle: a cgroup of this bench's own, on v1's blkio hierarchy or on v2 with io enabled.
cgroot=/sys/fs/cgroup cg="" cg_rule=""
if [[ -f $cgroot/blkio/blkio.throttle.read_bps_device ]]; then
  cg=$cgroot/blkio/ingest-bench-card-$$ cg_rule=blkio.throttle.read_bps_device
elif [[ $(stat -fc %T $cgroot) == cgroup2fs ]] && grep -qw io $cgroot/cgroup.controllers; then
  grep -qw io $cgroot/cgroup.subtree_control || echo +io >$cgroot/cgroup.subtree_control \
    || die "cannot enable the io controller in $cgroot/cgroup.subtree_control"
  cg=$cgroot/ingest-bench-card-$$ cg_rule=io.max
else
  die "no cgroup to throttle reads: neither v1's blkio ($cgroot/blkio) nor v2's io controller ($cgroot/cgroup.controllers)"
fi

# throttle MAJ:MIN BYTES/S: limits the card's reads in the cgroup (0: lifts the limit).
throttle() {
  if [[ $cg_rule == io.max ]]; then
    echo "$1 rbps=$( (($2)) && echo "$2" || echo max)" >"$cg/io.max"
  else
    echo "$1 $2" >"$cg/$cg_rule"
  fi
}

cleanup() {
  set +e
  local pid
  if [[ -n $cg && -d $cg ]]; then
    # Anything still in the cgroup was started by this bench (a contender cut off by a signal).
    while read -r pid; do kill -KILL "$pid" 2>/dev/null; done <"$cg/cgroup.procs"
    for _ in $(seq 50); do [[ -s $cg/cgroup.procs ]] || break; sleep 0.1; done
    rmdir "$cg" || echo "bench: WARNING: could not remove cgroup $cg" >&2
  fi
  bench_cleanup
}
bench_traps cleanup
mkdir "$cg" || die "cannot create cgroup $cg"
export cg_procs=$cg/cgroup.procs
# shellcheck disable=SC2016  # run by bench_run's bash: it joins the cgroup, then runs the contender
join='echo $$ >"$cg_procs"'

rm -rf "$work" && mkdir -p "$work/card" "$work/weed"
card=$work/card
fstype=$(findmnt -no FSTYPE -T "$work")
[[ $fstype != @(tmpfs|ramfs) ]] || die "WORK=$work is on $fstype: SeaweedFS and ingest would write to memory; set WORK to a directory on a disk"

# scaled N: N × SCALE, at least 1.
scaled() { awk -v n="$1" -v s="$scale" 'BEGIN {v = int(n * s + 0.5); print (v < 1 ? 1 : v)}'; }
mib=1048576
photo="$card/DCIM/{dir}MEDIA/DJI_{i:05d}.JPG" video="$card/DCIM/{dir}MEDIA/DJI_{i:05d}.MP4"

# make_layout NAME: fills $card with layout NAME.
make_layout() {
  case $1 in
    big-last)  bench_files "$photo" 1 "$(scaled 200)" $((4 * mib))
               bench_files "$video" "$(($(scaled 200) + 1))" 1 $(($(scaled 1024) * mib)) ;;
    big-first) bench_files "$photo" 1 "$(scaled 200)" $((4 * mib))
               bench_files "$video" 0 1 $(($(scaled 1024) * mib)) ;;
    one-4g)    bench_files "$video" 1 1 $(($(scaled 4096) * mib)) ;;
    mixed)     bench_files "$photo" 1 "$(scaled 200)" $((4 * mib))
               bench_files "$card/DCIM/{dir}MEDIA/DJI_{i:05d}.SRT" 1 "$(scaled 3000)" 300000 ;;
  esac
}
# layout_bytes NAME: what make_layout writes, for the image's size.
layout_bytes() {
  case $1 in
    big-*)  echo $(($(scaled 200) * 4 * mib + $(scaled 1024) * mib)) ;;
    one-4g) echo $(($(scaled 4096) * mib)) ;;
    mixed)  echo $(($(scaled 200) * 4 * mib + $(scaled 3000) * (300000 + 16384))) ;;  # + an inode's share each
  esac
}

echo "== Starting SeaweedFS on 127.0.0.1"
bench_server "$work/weed"
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); card reads throttled to $mbps MB/s by $cg/$cg_rule"

declare -A ratio walls history
for layout in "${layouts[@]}"; do
  echo
  echo "== Layout $layout: making the card"
  need=$(layout_bytes "$layout")
  avail=$(($(df -B1 --output=avail "$work" | tail -1)))
  ((avail > need * 12 / 10 + 2 * need + mib * 1024)) \
    || die "$work: $(numfmt --to=iec "$avail") free, layout $layout needs about $(numfmt --to=iec $((need * 32 / 10 + mib * 1024)))"
  image_dir=$(card_image_dir "$need" "$work")
  card_mount "$image_dir/ingest-bench-card.img" "$card" "$need" BENCH_CARD --direct-io=on || die "no loop device for the card"
  make_layout "$layout"
  sync -f "$card"
  mount -o remount,ro "$card"
  bench_expect "$card" "$work"
  majmin=$(cat "/sys/block/${card_loopdev#/dev/}/dev")
  throttle "$majmin" "$bps"
  echo "card: $card_loopdev ($majmin) on $card, $card_files files, $(numfmt --to=iec "$card_bytes")," \
    "$(calc "$card_bytes / 1e6 / $mbps") s at $mbps MB/s; image in $image_dir ($(stat -f -c %T "$image_dir"))"

  bench_rounds "$layout" "$repeat" "$work" "$join"

  read_s=$(median "${secs[read]}")
  # The reference must be the card's speed: a read faster than the throttle allows means it did not apply.
  if (($(calc "$read_s < 0.95 * $card_bytes / $bps"))); then
    die "the plain read took $read_s s, less than the $(calc "$card_bytes / $bps") s that $mbps MB/s allows: the throttle ($cg/$cg_rule) did not apply"
  fi
  echo
  echo "### $layout: $card_files files, $(numfmt --to=iec "$card_bytes"), card read at $mbps MB/s; median of $repeat cold-cache run(s)"
  echo
  echo "| contender | wall s | × one plain read | CPU s (user+sys) | peak RSS MiB | server CPU s |"
  echo "|---|--:|--:|--:|--:|--:|"
  for name in "${names[@]}"; do
    wall=$(median "${secs[$name]}") walls[$layout,$name]=$wall
    ratio[$layout,$name]=$(printf '%.2f' "$(calc "$wall / $read_s")")
    [[ -z ${late[$name]:-} ]] || ratio[$layout,$name]="> ${ratio[$layout,$name]}"
    printf '| %s | %.2f | %s | %.2f | %.1f | %.2f |\n' "${bench_label[$name]}${late[$name]:+ (${late[$name]})}" \
      "$wall" "${ratio[$layout,$name]}" "$(median "${cpu[$name]}")" "$(calc "${rss[$name]} / 1024")" "$(median "${srv[$name]}")"
  done
  # The card's ASC MHL history is written after its last object verified: its seconds (the
  # summary's mhl_seconds) are what it adds to the run. Target (issue 36): at most 1 %.
  if [[ -n ${mhl[ingest]:-} ]]; then
    history[$layout]=$(printf '%.2f %%' "$(calc "100 * $(median "${mhl[ingest]}") / ${walls[$layout,ingest]}")")
    echo
    echo "ingest's ASC MHL history: $(median "${mhl[ingest]}") s of its ${walls[$layout,ingest]} s, ${history[$layout]} (target: at most 1 %)"
  fi
  throttle "$majmin" 0
  card_release
done

echo
echo "## Wall time ÷ one plain read of the card at $mbps MB/s (target: ingest ≤ 1.02, and below aws)"
echo
printf '| contender |' && printf ' %s |' "${layouts[@]}" && echo
printf '|---|' && printf -- '--:|%.0s' "${layouts[@]}" && echo
for name in "${names[@]}"; do
  printf '| %s |' "${bench_label[$name]}"
  for layout in "${layouts[@]}"; do printf ' %s |' "${ratio[$layout,$name]}"; done
  echo
done
if [[ " ${names[*]} " == *" ingest "* ]]; then
  printf '| **ingest: target met** |'
  for layout in "${layouts[@]}"; do
    verdict=pass r=${ratio[$layout,ingest]}
    [[ $r != ">"* ]] && (($(calc "$r <= 1.02"))) || verdict="**FAIL**"
    # Ahead of aws: the medians' wall times, not the ratios rounded to two places.
    if [[ -n ${walls[$layout,aws]:-} && $r != ">"* ]] && ! (($(calc "${walls[$layout,ingest]} < ${walls[$layout,aws]}"))); then
      verdict="**FAIL**"
    fi
    printf ' %s |' "$verdict"
  done
  echo
  printf '| ingest: ASC MHL history ÷ its wall time (target ≤ 1 %%) |'
  for layout in "${layouts[@]}"; do printf ' %s |' "${history[$layout]:-}"; done
  echo
fi
echo
echo "Settings: all defaults (aws: 10 concurrent requests, 8 MiB parts; rclone: --transfers 4," \
  "5 MiB chunks, reads a file above 200 MiB twice (MD5 first); s5cmd: 256 workers, 50 MiB parts × 5)." \
  "Card: ext4 on a loop device (direct I/O), read-only, reads throttled to $mbps MB/s ($cg_rule)," \
  "SCALE=$scale. Server: one SeaweedFS on 127.0.0.1, not throttled; $(nproc) cores."
bench_versions
