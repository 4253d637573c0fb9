#!/usr/bin/env bash
# BENCHMARK (not a test): uploading a card to S3 with `ingest PATH --endpoint … --bucket …`
# against `aws s3 cp --recursive`, `rclone copy` and `s5cmd cp`, all with their default transfer
# settings, to the same SeaweedFS on 127.0.0.1, on the same data, in one run. ingest stages
# (copies and fingerprints) into its state directory before it uploads: that is part of its
# cost, fairly. Each contender runs REPEAT times, interleaved, each time into a fresh bucket,
# with cold data caches (programs warm); medians of wall and CPU time, the highest peak RSS, and
# what bounds a run: the server's CPU time, the cores the whole machine kept busy, and the
# requests the server answered, by its own count (SeaweedFS's metrics).
# After every run the bucket is listed: a contender that uploaded less than the card fails the
# bench. A run cut off at TIMEOUT is reported with the objects it had landed, and the bench goes on.
# Cases (CASES, default "big small5k small100k"), each on its own card (an ext4 loop mount when root):
#   big        FILES (200) files of 4 MiB + one BIG (1G) file; REPEAT 3. Targets: wall time ≤ 0.9×
#              the fastest peer's, CPU (user+sys) ≤ 0.5× the leanest peer's, peak RSS < 64 MiB.
#   small5k    5,000 files of 20 kB (drone telemetry, thumbnails, sensor logs); REPEAT 3. Targets
#              (issue 14): wall ≤ the fastest peer's, CPU ≤ the leanest peer's, peak RSS < 64 MiB.
#   small100k  100,000 files of 4 KiB; REPEAT 1. Targets (issue 14): peak RSS < 64 MiB, time per
#              file ≤ 1.25× small5k's in the same run (linear, not quadratic).
#   bigwarm, small5kwarm, small100kwarm
#              the same card with its files in the page cache: read once before each run, after
#              the caches are dropped (a folder another program has just written). Targets: wall
#              time ≤ the fastest peer's (issue 14: do not lose to a peer when the data is cached),
#              CPU and peak RSS as the cold case.
#   env: CASES, BIG, FILES (big only), REPEAT (overrides every case's), SETTLE (seconds between
#        runs, 3), CONTENDERS (default "ingest aws rclone s5cmd"; add ingest-base with BASELINE=path
#        to another ingest binary, to compare two builds in one run), TIMEOUT (seconds a run, 1800),
#        WORK (default out/bench-upload, not tmpfs: SeaweedFS data, ingest's state directories),
#        CARD_DIR (where the card's image lives: default /dev/shm when it has room, as
#        bench-card.sh explains: a card is a device of its own, not the disk the uploads write
#        to), INGEST (binary), VENV (default .venv: weed, aws, s5cmd)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest} ingest_base=${BASELINE:-}
venv=${VENV:-$repo/.venv}
big=${BIG:-1G} files=${FILES:-200} settle=${SETTLE:-3} timeout=${TIMEOUT:-1800}
rss_target_mib=64 mib=1048576
read -r -a cases <<<"${CASES:-big small5k small100k}"
read -r -a names <<<"${CONTENDERS:-ingest aws rclone s5cmd}"
work=${WORK:-$repo/out/bench-upload}
VENV=$venv source "$repo/scripts/weed.sh"   # weed_start, weed_wait, weed_stop, weed_s3
source "$repo/scripts/bench-s3.sh"           # the contenders, bench_run, bench_check…
source "$repo/scripts/loop-card.sh"          # card_mount, card_release

bench_tools "${names[@]}"
for name in "${names[@]}"; do bench_uploads "$name" || die "CONTENDERS: '$name' does not upload (ingest aws rclone s5cmd)"; done
for case in "${cases[@]}"; do
  [[ $case == @(big|small5k|small100k)?(warm) ]] || die "CASES: unknown '$case' (big small5k small100k, each also …warm)"
done
b=${big%B} && big_bytes=$(numfmt --from=iec "${b%i}")

# Each case: its files (count and size, plus the big one), its runs, and its wall and CPU targets.
declare -A case_files=([big]=$files [small5k]=5000 [small100k]=100000)
declare -A case_size=([big]=$((4 * mib)) [small5k]=20000 [small100k]=4096)
declare -A case_repeat=([big]=3 [small5k]=3 [small100k]=1)
declare -A case_wall=([big]=0.9 [small5k]=1.0) case_cpu=([big]=0.5 [small5k]=1.0)
for base in big small5k small100k; do   # its warm case: the same card; wall ≤ the fastest peer's
  case_files[${base}warm]=${case_files[$base]} case_size[${base}warm]=${case_size[$base]}
  case_repeat[${base}warm]=${case_repeat[$base]}
  [[ -z ${case_wall[$base]:-} ]] || case_wall[${base}warm]=1.0 case_cpu[${base}warm]=${case_cpu[$base]}
done
case_bytes() { echo $((case_files[$1] * case_size[$1] + $([[ $1 == big* ]] && echo "$big_bytes" || echo 0))); }
case_title() {
  echo "${case_files[$1]} × $(numfmt --to=iec "${case_size[$1]}")$([[ $1 != big* ]] || echo " + 1 × $big")"
}

bench_traps 'set +e; bench_cleanup'
rm -rf "$work" && mkdir -p "$work/card" "$work/weed"
card=$work/card

fstype=$(findmnt -no FSTYPE -T "$work")
[[ $fstype != @(tmpfs|ramfs) ]] || die "WORK=$work is on $fstype: SeaweedFS and ingest would write to memory; set WORK to a directory on a disk"
for case in "${cases[@]}"; do
  data=$(case_bytes "$case")
  # card image (data + 20%) + ingest's staging + the server's copy (the bucket goes after each run)
  need=$((data * 12 / 10 + 2 * data + 1024 * mib))
  avail=$(($(df -B1 --output=avail "$work" | tail -1)))
  ((avail > need)) || die "$work: $(numfmt --to=iec "$avail") free, case $case needs about $(numfmt --to=iec "$need")"
done

echo "== Starting SeaweedFS on 127.0.0.1"
bench_server "$work/weed"
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
((EUID == 0)) || echo "bench: WARNING: not root, cannot drop page caches: reads may come from memory" >&2

declare -A per_file_ms
for case in "${cases[@]}"; do
  repeat=${REPEAT:-${case_repeat[$case]}}
  data=$(case_bytes "$case")
  echo
  echo "== Case $case: making the card, $(case_title "$case") of random data"
  if ((EUID == 0)); then   # room for an inode per file too: ext4 gives one per 16 KiB
    need=$((data + ${case_files[$case]} * 16384))
    card_mount "$(card_image_dir "$need" "$work")/ingest-bench-upload.img" "$card" "$need" BENCH_CARD --direct-io=on \
      || true
  fi
  bench_files "$card/DCIM/{dir}MEDIA/DJI_{i:05d}.$([[ $case == big* ]] && echo JPG || echo SRT)" 1 "${case_files[$case]}" "${case_size[$case]}"
  [[ $case != big* ]] || bench_files "$card/DCIM/{dir}MEDIA/DJI_{i:05d}.MP4" $((files + 1)) 1 "$big_bytes"
  sync -f "$card"
  [[ -z $card_mnt ]] || mount -o remount,ro "$card"
  bench_expect "$card" "$work"
  ((card_bytes == data)) || die "the card holds $card_bytes bytes, not $data"
  echo "card: ${card_loopdev:-plain directory} on $card, $card_files files, $(numfmt --to=iec "$card_bytes")"

  bench_warm=$([[ $case == *warm ]] && echo 1 || echo 0)
  bench_rounds "$case" "$repeat" "$work"
  card_release
  rm -rf "$card" && mkdir -p "$card"

  declare -A med=() medcpu=()
  for name in "${names[@]}"; do med[$name]=$(median "${secs[$name]}") medcpu[$name]=$(median "${cpu[$name]}"); done
  echo
  echo "## Upload to S3, $case: $(numfmt --to=iec "$card_bytes") ($(case_title "$case")), median of $repeat $( ((bench_warm)) && echo "warm-card" || echo "cold-cache") run(s)"
  echo
  echo "| contender | wall s | MB/s | ms per file | CPU s (user+sys) | peak RSS MiB | server CPU s | cores busy | server requests (last run) |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|---|"
  for name in "${names[@]}"; do
    printf '| %s | %.2f | %.0f | %.3f | %.2f | %.1f | %.2f | %.2f | %s |\n' "${bench_label[$name]}${late[$name]:+ (${late[$name]})}" \
      "${med[$name]}" "$(calc "$card_bytes / 1e6 / ${med[$name]}")" "$(calc "${med[$name]} * 1000 / ${landed[$name]:-$card_files}")" \
      "${medcpu[$name]}" "$(calc "${rss[$name]} / 1024")" "$(median "${srv[$name]}")" "$(median "${busy[$name]}")" \
      "${requests[$name]:-none}"
  done
  echo
  echo "Peak RSS: the highest of the runs. Server CPU s: SeaweedFS's user+sys during the run (not in the targets)." \
    "Cores busy: the CPU time the whole machine spent (client, server, kernel) over the wall time, of $(nproc):" \
    "near $(nproc), the machine, not one program, bounds the run. Server requests: SeaweedFS's own count" \
    "(SeaweedFS_s3_request_total), by type, for the card's $card_files files."
  [[ " ${names[*]} " == *" ingest "* ]] || continue

  verdict() { (($(calc "$1"))) && [[ -z ${late[ingest]:-} ]] && echo pass || echo "**FAIL**"; }
  per_file_ms[$case]=$(calc "${med[ingest]} * 1000 / ${landed[ingest]:-$card_files}")  # cut off: per object landed
  echo
  echo "| measure | ingest | reference | ratio | target | result |"
  echo "|---|--:|---|--:|---|---|"
  fast="" lean=""
  for name in "${names[@]}"; do
    [[ $name == ingest* || -n ${late[$name]:-} ]] && continue
    [[ -n $fast ]] && (($(calc "${med[$name]} >= ${med[$fast]}"))) || fast=$name
    [[ -n $lean ]] && (($(calc "${medcpu[$name]} >= ${medcpu[$lean]}"))) || lean=$name
  done
  if [[ -n ${case_wall[$case]:-} && -n $fast ]]; then
    ratio=$(calc "${med[ingest]} / ${med[$fast]}")
    printf '| wall time | %.2f s | %.2f s (%s, the fastest peer) | %.2f× | ≤ %s× | %s |\n' "${med[ingest]}" \
      "${med[$fast]}" "${bench_label[$fast]}" "$ratio" "${case_wall[$case]}" "$(verdict "$ratio <= ${case_wall[$case]}")"
    ratio=$(calc "${medcpu[ingest]} / ${medcpu[$lean]}")
    printf '| CPU (user+sys) | %.2f s | %.2f s (%s, the leanest peer) | %.2f× | ≤ %s× | %s |\n' "${medcpu[ingest]}" \
      "${medcpu[$lean]}" "${bench_label[$lean]}" "$ratio" "${case_cpu[$case]}" "$(verdict "$ratio <= ${case_cpu[$case]}")"
  fi
  if [[ $case == small100k && -n ${per_file_ms[small5k]:-} ]]; then
    ratio=$(calc "${per_file_ms[small100k]} / ${per_file_ms[small5k]}")
    printf '| time per file | %.3f ms | %.3f ms (ingest, small5k) | %.2f× | ≤ 1.25× | %s |\n' "${per_file_ms[small100k]}" \
      "${per_file_ms[small5k]}" "$ratio" "$(verdict "$ratio <= 1.25")"
  fi
  rss_mib=$(calc "${rss[ingest]} / 1024")
  printf '| peak RSS | %.1f MiB | %d MiB | %.2f× | < %d MiB | %s |\n' "$rss_mib" "$rss_target_mib" \
    "$(calc "$rss_mib / $rss_target_mib")" "$rss_target_mib" "$(verdict "$rss_mib < $rss_target_mib")"
done
echo
echo "Settings: all defaults. aws: no config file (AWS_CONFIG_FILE=/dev/null), so 10 concurrent requests," \
  "8 MiB multipart threshold and part size; rclone: no config file, remote from RCLONE_CONFIG_BENCH_*" \
  "(provider SeaweedFS), so --transfers 4, --s3-upload-cutoff 200Mi, --s3-chunk-size 5Mi," \
  "--s3-upload-concurrency 4 (rclone reads a file above the cutoff twice: MD5 first, for its metadata);" \
  "s5cmd: 256 workers, 50 MiB parts, 5 at a time a file."
bench_versions
echo "Server: one SeaweedFS (weed server -s3) on 127.0.0.1, data on $(findmnt -no SOURCE,FSTYPE -T "$work" | tr -s ' ');" \
  "card: $( ((EUID == 0)) && echo "ext4 on a loop device (direct I/O)" || echo "a plain directory"); $(nproc) cores."
