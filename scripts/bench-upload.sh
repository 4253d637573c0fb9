#!/usr/bin/env bash
# BENCHMARK (not a test): uploading a card to S3 with `ingest PATH --endpoint … --bucket …`
# against `aws s3 cp --recursive` and `rclone copy`, all with their default transfer settings,
# to the same SeaweedFS on 127.0.0.1, on the same data, in one run. ingest stages (copies and
# fingerprints) into its state directory before it uploads: that is part of its cost, fairly.
# Each contender runs REPEAT times, interleaved, each time into a fresh bucket, with cold data
# caches (programs warm); medians of wall and CPU time, the highest peak RSS. After every run the
# bucket is listed: a contender that uploaded less than the data set fails the bench.
# Targets: wall time ≤ 0.9× the faster peer's, CPU (user+sys) ≤ 0.5× the leaner peer's,
# peak RSS < 64 MiB.
# Data: FILES files of 4 MiB plus one BIG file of random data, on an ext4 loop mount when root.
#   env: BIG (default 1G), FILES (200), REPEAT (3), SETTLE (seconds between runs, 3),
#        CONTENDERS (default "ingest aws rclone"), TIMEOUT (seconds per run, 1800),
#        WORK (default out/bench-upload, not tmpfs: card image, SeaweedFS data, ingest's
#        state directories), INGEST (binary), VENV (default .venv: weed and aws)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest}
venv=${VENV:-$repo/.venv}
big=${BIG:-1G} files=${FILES:-200} repeat=${REPEAT:-3} settle=${SETTLE:-3} timeout=${TIMEOUT:-1800}
file_mib=4 rss_target_mib=64
read -r -a names <<<"${CONTENDERS:-ingest aws rclone}"
work=${WORK:-$repo/out/bench-upload}
weed=$venv/bin/weed aws=$venv/bin/aws py=$venv/bin/python
VENV=$venv source "$repo/scripts/weed.sh"   # weed_start, weed_wait, weed_stop

die() { echo "bench: $*" >&2; exit 1; }
[[ -x $ingest ]] || die "no $ingest; run 'make release' first"
[[ -x $weed && -x $aws && -x $py ]] || die "no $weed or $aws; run 'make venv' first"
command -v rclone >/dev/null || die "no rclone; run 'make deps' (Debian package rclone)"
[[ -x /usr/bin/time ]] || die "no /usr/bin/time (GNU time); run 'make deps'"
for name in "${names[@]}"; do
  [[ $name == @(ingest|aws|rclone) ]] || die "CONTENDERS: unknown '$name' (ingest, aws, rclone)"
done

# Only this script's settings: nothing from the machine's AWS, rclone or ingest configuration.
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(AWS_|RCLONE_|INGEST_)' || true)

# ingest uploads only once it has --endpoint and --bucket; until then, measure the peers alone.
if [[ " ${names[*]} " == *" ingest "* ]]; then
  help=$("$ingest" run --help 2>&1 || true)
  if ! grep -q -- '--endpoint' <<<"$help" || ! grep -q -- '--bucket' <<<"$help"; then
    echo "bench: NOTE: $ingest does not upload yet ('ingest run --help' lists no --endpoint/--bucket):" \
      "measuring aws and rclone only, no ratios" >&2
    keep=() && for name in "${names[@]}"; do [[ $name == ingest ]] || keep+=("$name"); done
    names=("${keep[@]}") ingest_skipped=1
  fi
fi
((${#names[@]} > 0)) || die "no contender left to run"

source "$repo/scripts/loop-card.sh"   # card_mount, card_release
cleanup() {
  set +e
  weed_stop   # only the weed this bench started
  card_release
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rm -rf "$work" && mkdir -p "$work/card" "$work/weed/data"
card=$work/card

fstype=$(findmnt -no FSTYPE -T "$work")
[[ $fstype != @(tmpfs|ramfs) ]] || die "WORK=$work is on $fstype: SeaweedFS and ingest would write to memory; set WORK to a directory on a disk"
b=${big%B}
big_bytes=$(numfmt --from=iec "${b%i}")
data=$((big_bytes + files * file_mib * 1048576))
# card image (data + 20%) + ingest's staging + the server's copy (the bucket goes after each run)
need=$((data * 12 / 10 + 2 * data + 1073741824))
avail=$(($(df -B1 --output=avail "$work" | tail -1)))
((avail > need)) || die "$work: $(numfmt --to=iec "$avail") free, the bench needs about $(numfmt --to=iec "$need")"

echo "== Making the data set: $files files of $file_mib MiB and one $big file of random data"
if ((EUID == 0)); then
  card_mount "$work/card.img" "$card" "$data" BENCH_CARD --direct-io=on || true
fi
# random FILE BYTES: incompressible, file-specific data (openssl AES-CTR is fast), no duplicates.
random() { head -c "$2" /dev/zero | openssl enc -aes-128-ctr -nosalt -pbkdf2 -iter 1 -pass "pass:$1.$$.$SRANDOM" >"$1"; }
command -v openssl >/dev/null || random() { head -c "$2" /dev/urandom >"$1"; }
mkdir -p "$card/DCIM/100MEDIA"
for ((i = 1; i <= files; i++)); do random "$(printf '%s/DCIM/100MEDIA/DJI_%04d.JPG' "$card" "$i")" $((file_mib * 1048576)); done
random "$(printf '%s/DCIM/100MEDIA/DJI_%04d.MP4' "$card" $((files + 1)))" "$big_bytes"
sync -f "$card"
[[ -n $card_mnt ]] && mount -o remount,ro "$card"
objects=$((files + 1))
bytes=$(find "$card" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}')
((bytes == data)) || die "the data set holds $bytes bytes, not $data"
(cd "$card" && find . -type f -printf 'card/%P\n' | LC_ALL=C sort) >"$work/expected-keys"
echo "card: ${card_loopdev:-plain directory} on $card, $objects files, $(numfmt --to=iec "$bytes")"

echo "== Starting SeaweedFS on 127.0.0.1"
export AWS_ACCESS_KEY_ID=bench-upload-access AWS_SECRET_ACCESS_KEY=bench-upload-secret-$SRANDOM$SRANDOM
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null  # aws: default transfer settings
weed_start "$work/weed" "$work/weed.log" bench
endpoint=$weed_endpoint
s3() { weed_s3 "$@"; }
weed_wait 60 || die "SeaweedFS did not answer on $endpoint within 60 s"
echo "SeaweedFS (pid $weed_pid) on $endpoint, data in $work/weed/data ($(findmnt -no SOURCE,FSTYPE -T "$work"))"
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
((EUID == 0)) || echo "bench: WARNING: not root, cannot drop page caches: reads may come from memory" >&2

# The contenders: each a shell command reading $card and writing into bucket $bucket (fresh,
# empty) under card/ (ingest chooses its own keys); $log gets its output.
declare -A label=([ingest]="ingest" [aws]="aws s3 cp --recursive" [rclone]="rclone copy")
declare -A cmd=(
  [ingest]='INGEST_CONFIG=/dev/null "$ingest" "$card" --endpoint "$endpoint" --bucket "$bucket" --state-dir "$state" --json >"$log" 2>&1'
  [aws]='"$aws" --endpoint-url "$endpoint" s3 cp --recursive "$card" "s3://$bucket/card/" --only-show-errors >"$log" 2>&1'
  [rclone]='rclone copy "$card" "bench:$bucket/card" --config /dev/null >"$log" 2>&1'
)
# rclone's remote "bench:", from the environment only; everything else at rclone's defaults.
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=SeaweedFS RCLONE_CONFIG_BENCH_ENV_AUTH=false
export RCLONE_CONFIG_BENCH_ENDPOINT=$endpoint RCLONE_CONFIG_BENCH_REGION=us-east-1
export RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
export ingest aws card endpoint

# check NAME BUCKET: the bucket holds the whole data set (peers: under the same names), or exit.
check() {
  local listing count total
  listing=$(s3 s3api list-objects-v2 --bucket "$2" --query 'Contents[].[Key, Size]' --output text) \
    || die "$1: cannot list bucket $2"
  [[ $listing == None ]] && listing=""
  count=$(grep -c . <<<"$listing" || true)
  total=$(awk -F'\t' '{s += $2} END {printf "%.0f\n", s}' <<<"$listing")
  if ((count < objects || total < bytes)); then
    die "$1 FAILED: the bucket holds $count objects, $total bytes; the data set is $objects files, $bytes bytes"
  fi
  if [[ $1 != ingest ]]; then
    cut -f1 <<<"$listing" | LC_ALL=C sort | diff -q - "$work/expected-keys" >/dev/null \
      || die "$1 FAILED: the keys in bucket $2 are not card/ + the card's paths"
    ((count == objects && total == bytes)) || die "$1 FAILED: $count objects, $total bytes (expected $objects, $bytes)"
  elif ((count != objects || total != bytes)); then
    echo "  (ingest: $count objects, $total bytes, for $objects files, $bytes bytes)"
  fi
}
weed_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15 + $16 + $17) / hz}' "/proc/$weed_pid/stat"; }
calc() { awk "BEGIN {print $1}"; }

declare -A secs rss cpu srv
for ((r = 1; r <= repeat; r++)); do
  for ((i = 0; i < ${#names[@]}; i++)); do
    name=${names[(i + r - 1) % ${#names[@]}]}   # rotate: no contender always goes first
    bucket=bench-r$r-$name log=$work/$name.log state=$work/state
    rm -rf "$state" && mkdir -p "$state"
    s3 s3api create-bucket --bucket "$bucket" >/dev/null
    # Let the bucket's collection grow its volumes now, not during the timed upload.
    s3 s3api put-object --bucket "$bucket" --key warm-up --body /etc/hostname >/dev/null
    s3 s3api delete-object --bucket "$bucket" --key warm-up >/dev/null
    # Cold caches, then wait (see bench-stage.sh: on this VM, memory freed moments ago is
    # cheaper to reuse than memory freed seconds ago); then warm the programs, not the data.
    sync && { ((EUID != 0)) || echo 3 >/proc/sys/vm/drop_caches; } && sleep "$settle"
    "$ingest" --version >/dev/null 2>&1; rclone version >/dev/null 2>&1; s3 s3api list-buckets >/dev/null
    before=$(weed_cpu)
    bucket=$bucket state=$state log=$log /usr/bin/time -f '%e %U %S %M' -o "$work/time" \
      timeout --foreground -k 10 "$timeout" bash -c "${cmd[$name]}" \
      || { tail -20 "$log" >&2; die "$name failed (exit status above; log: $log)"; }
    read -r e u s m <"$work/time"
    secs[$name]+="$e " cpu[$name]+="$(calc "$u + $s") " srv[$name]+="$(calc "$(weed_cpu) - $before") "
    rss[$name]=$((m > ${rss[$name]:-0} ? m : ${rss[$name]:-0}))
    printf '  run %d/%d  %-24s %7.2f s  %6.2f CPU s  %5d MiB\n' "$r" "$repeat" "${label[$name]}" "$e" "$(calc "$u + $s")" $((m / 1024))
    if [[ $name == ingest ]] && grep -q '"event":"summary"' "$log" && ! grep -q '"event":"summary".*"failed":0[,}]' "$log"; then
      grep -v '"staged"' "$log" >&2; die "ingest reported failures"
    fi
    check "$name" "$bucket"
    s3 s3 rb --force "s3://$bucket" >/dev/null || echo "bench: WARNING: could not delete bucket $bucket" >&2
    rm -rf "$state"
  done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A med medcpu
for name in "${names[@]}"; do med[$name]=$(median "${secs[$name]}") medcpu[$name]=$(median "${cpu[$name]}"); done

echo
echo "## Upload to S3: $(numfmt --to=iec "$bytes") ($files × $file_mib MiB + 1 × $big), median of $repeat cold-cache runs"
echo
echo "| contender | wall s | MB/s | CPU s (user+sys) | peak RSS MiB | server CPU s |"
echo "|---|--:|--:|--:|--:|--:|"
for name in "${names[@]}"; do
  printf '| %s | %.2f | %.0f | %.2f | %.1f | %.2f |\n' "${label[$name]}" "${med[$name]}" \
    "$(calc "$bytes / 1e6 / ${med[$name]}")" "${medcpu[$name]}" "$(calc "${rss[$name]} / 1024")" "$(median "${srv[$name]}")"
done
echo
echo "Peak RSS: the highest of the runs. Server CPU s: SeaweedFS's user+sys during the run (not in the targets)."
if [[ " ${names[*]} " == *" ingest "* ]] && [[ " ${names[*]} " == *" aws "* ]] && [[ " ${names[*]} " == *" rclone "* ]]; then
  fast=aws lean=aws
  (($(calc "${med[rclone]} < ${med[aws]}"))) && fast=rclone
  (($(calc "${medcpu[rclone]} < ${medcpu[aws]}"))) && lean=rclone
  wall_ratio=$(calc "${med[ingest]} / ${med[$fast]}") cpu_ratio=$(calc "${medcpu[ingest]} / ${medcpu[$lean]}")
  rss_mib=$(calc "${rss[ingest]} / 1024")
  verdict() { (($(calc "$1"))) && echo pass || echo "**FAIL**"; }
  echo
  echo "| measure | ingest | reference | ratio | target | result |"
  echo "|---|--:|---|--:|---|---|"
  printf '| wall time | %.2f s | %.2f s (%s, the faster peer) | %.2f× | ≤ 0.9× | %s |\n' "${med[ingest]}" \
    "${med[$fast]}" "${label[$fast]}" "$wall_ratio" "$(verdict "$wall_ratio <= 0.9")"
  printf '| CPU (user+sys) | %.2f s | %.2f s (%s, the leaner peer) | %.2f× | ≤ 0.5× | %s |\n' "${medcpu[ingest]}" \
    "${medcpu[$lean]}" "${label[$lean]}" "$cpu_ratio" "$(verdict "$cpu_ratio <= 0.5")"
  printf '| peak RSS | %.1f MiB | %d MiB | %.2f× | < %d MiB | %s |\n' "$rss_mib" "$rss_target_mib" \
    "$(calc "$rss_mib / $rss_target_mib")" "$rss_target_mib" "$(verdict "$rss_mib < $rss_target_mib")"
fi
echo
echo "Settings: all defaults. aws: no config file (AWS_CONFIG_FILE=/dev/null), so 10 concurrent requests," \
  "8 MiB multipart threshold and part size; rclone: no config file, remote from RCLONE_CONFIG_BENCH_*" \
  "(provider SeaweedFS), so --transfers 4, --s3-upload-cutoff 200Mi, --s3-chunk-size 5Mi," \
  "--s3-upload-concurrency 4 (rclone reads a file above the cutoff twice: MD5 first, for its metadata)."
echo "Versions: $("$aws" --version 2>&1); $(rclone version 2>/dev/null | head -1);" \
  "weed $("$weed" version 2>/dev/null | grep -o 'version.*' | head -1 | sed 's/^version //'); $("$ingest" --version 2>&1)"
echo "Server: one SeaweedFS (weed server -s3) on 127.0.0.1, data on $(findmnt -no SOURCE,FSTYPE -T "$work" | tr -s ' ');" \
  "card: $([[ -n $card_mnt ]] && echo "ext4 on a loop device (direct I/O)" || echo "a plain directory"); $(nproc) cores."
if [[ -n ${ingest_skipped:-} ]]; then
  echo
  echo "bench: NOTE: ingest was not measured ($ingest has no --endpoint/--bucket yet): no ratios" >&2
fi
