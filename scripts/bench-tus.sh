#!/usr/bin/env bash
# BENCHMARK (not a test): uploading a card to a tus 1.0 server with `ingest CARD --endpoint
# tus+http://…` against tuspy (tus.io's Python client, scripts/tus_peer.py: one file after
# another, as its uploader goes), both with 16 MiB chunks (ingest's default), to the same
# tuspyserver on 127.0.0.1 (scripts/tus_server.py), on the same data, in one run. ingest stages
# (copies and fingerprints) into its state directory before it uploads: that is part of its cost.
# Case "mixed": FILES (100) files of 4 MiB + one BIG (1G) file, on a plain directory in CARD_DIR
# (default /dev/shm when it has room, else WORK). Each contender runs REPEAT (3) times,
# interleaved (none always first), each time with cold caches (programs warm) and into a fresh
# server: a new tuspyserver on a new data directory, stopped by its PID after the run. Medians
# of wall and CPU (user+sys) time, the highest peak RSS (GNU time), and the server's own CPU
# time during the run (/proc/PID/stat): tuspyserver is Python, and may well be what bounds both.
# After every run what landed is checked: each card file must be one whole upload (offset ==
# size) of the same size and xxh128, else the bench fails.
#   env: FILES, BIG, REPEAT, SETTLE (seconds of rest before a run, 3), TIMEOUT (seconds a run,
#        1800), WORK (default out/bench-tus, not tmpfs: the server's data, ingest's state),
#        CARD_DIR, INGEST (binary), VENV (default .venv: tuspyserver, uvicorn, tuspy)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest} venv=${VENV:-$repo/.venv}
py=$venv/bin/python
big=${BIG:-1G} files=${FILES:-100} repeat=${REPEAT:-3} settle=${SETTLE:-3} timeout=${TIMEOUT:-1800}
work=${WORK:-$repo/out/bench-tus}
mib=1048576 names=(ingest tuspy)
source "$repo/scripts/loop-card.sh"   # card_image_dir

die() { echo "bench-tus: $*" >&2; exit 1; }
calc() { awk "BEGIN {print ($1)}"; }
# xxh128 PATH: the file's xxh128 (xxh128sum's progress line on stderr dropped).
xxh128() { local line; line=$(xxh128sum "$1" 2>/dev/null) || die "xxh128sum $1 failed"; echo "${line%% *}"; }
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

[[ -x $ingest ]] || die "no $ingest; run 'make release' first"
[[ -x $py ]] && "$py" -c 'import tuspyserver, uvicorn, tusclient' 2>/dev/null \
  || die "no tuspyserver, uvicorn or tuspy in $venv; run 'make venv' first"
[[ -x /usr/bin/time ]] || die "no /usr/bin/time (GNU time); run 'make deps'"
command -v xxh128sum >/dev/null || die "no xxh128sum; run 'make deps' (Debian package xxhash)"
b=${big%B} && big_bytes=$(numfmt --from=iec "${b%i}")
data=$((files * 4 * mib + big_bytes))

# The server: a fresh tuspyserver on DIR; sets server_pid, server_url.
server_pid="" server_url=""
server_start() {
  local dir=$1 line="" i
  mkdir -p "$dir" && : >"$dir.log"
  "$py" -u "$repo/scripts/tus_server.py" --dir "$dir" --port 0 >"$dir.log" 2>&1 &
  server_pid=$!
  for ((i = 0; i < 300; i++)); do
    line=$(head -1 "$dir.log")
    [[ $line == "listening "* ]] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$dir.log" >&2; die "tus_server.py exited"; }
    sleep 0.1
  done
  [[ $line == "listening "* ]] || die "tus_server.py did not listen within 30 s"
  server_url="http://${line#listening }/files/"
}
server_stop() {   # only the server this bench started, by its PID
  local i
  [[ -n $server_pid ]] || return 0
  kill -TERM "$server_pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
server_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15 + $16 + $17) / hz}' "/proc/$server_pid/stat"; }

card_path=""
cleanup() {
  set +e
  server_stop
  [[ -z $card_path ]] || rm -rf "$card_path"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$work" && mkdir -p "$work"
[[ $(findmnt -no FSTYPE -T "$work" | head -1) != @(tmpfs|ramfs) ]] \
  || die "WORK=$work is on tmpfs: the server and ingest would write to memory; set WORK to a directory on a disk"
need=$((3 * data + 1024 * mib))   # ingest's staging + one run's uploads (+ the card, if it falls back to WORK)
avail=$(($(df -B1 --output=avail "$work" | tail -1)))
((avail > need)) || die "$work: $(numfmt --to=iec "$avail") free, the bench needs about $(numfmt --to=iec "$need")"
card_path=$(card_image_dir "$data" "$work")/ingest-bench-tus-card.$$
card=$card_path/card

echo "== Making the card: $files × 4 MiB + 1 × $big of random data in $card"
"$py" - "$card/DCIM/100MEDIA" "$files" $((4 * mib)) "$big_bytes" <<'EOF'
import os, sys
folder, count, size, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(folder, exist_ok=True)
for path, n in [(f"{folder}/DJI_{i:05d}.JPG", size) for i in range(1, count + 1)] + [(f"{folder}/DJI_{count + 1:05d}.MP4", big)]:
    with open(path, "wb") as f:
        while n:
            k = min(n, 1 << 20); f.write(os.urandom(k)); n -= k
EOF
# What must land: "SIZE XXH128" of each card file, sorted.
(cd "$card" && find . -type f -printf '%s %p\n' | while read -r size path; do
  hash=$(xxh128 "$path") || exit 1; echo "$size $hash"; done | sort) >"$work/expected"
card_files=$(wc -l <"$work/expected")
card_bytes=$(awk '{s += $1} END {printf "%.0f\n", s}' "$work/expected")
((card_bytes == data)) || die "the card holds $card_bytes bytes, not $data"
echo "card: a plain directory on $(stat -f -c %T "$card"), $card_files files, $(numfmt --to=iec "$card_bytes")"
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
((EUID == 0)) || echo "bench-tus: WARNING: not root, cannot drop page caches" >&2

# check NAME DIR: every card file is one whole upload (offset == size) in DIR with its size and xxh128.
check() {
  local name=$1 dir=$2 whole partial bad
  "$py" - "$dir" >"$work/landed.paths" 2>"$work/landed.partial" <<'EOF'
import json, os, sys
d, partial = sys.argv[1], 0
for entry in sorted(os.listdir(d)):
    if entry.endswith(".info"):
        info, data = json.load(open(os.path.join(d, entry))), os.path.join(d, entry[:-5])
        if info.get("size") is not None and info.get("offset") == info["size"] == os.path.getsize(data):
            print(info["size"], data)
        else:
            partial += 1
print(partial, file=sys.stderr)
EOF
  partial=$(cat "$work/landed.partial")
  while read -r size path; do hash=$(xxh128 "$path") || exit 1; echo "$size $hash"; done <"$work/landed.paths" >"$work/landed"
  whole=$(wc -l <"$work/landed")
  bad=$(awk 'NR == FNR {want[$0] = 1; next} {n[$0]++} END {for (k in want) if (n[k] != 1) bad++; print bad + 0}' \
    "$work/expected" "$work/landed")
  ((bad == 0)) || die "$name FAILED: $bad of the card's $card_files files are not exactly one whole upload" \
    "of the same size and xxh128 among the server's $whole whole uploads ($partial unfinished)"
  ((whole == card_files && partial == 0)) \
    || echo "  ($name: $whole whole and $partial unfinished uploads for the card's $card_files files)"
}

declare -A secs=() cpu=() rss=() srv=()
declare -A cmd=(
  [ingest]='exec env INGEST_CONFIG="$work/ingest.toml" "$ingest" "$card" --endpoint "tus+$server_url" --state-dir "$state" --json >"$log" 2>&1'
  [tuspy]='exec "$py" "$repo/scripts/tus_peer.py" "$card" "$server_url" >"$log" 2>&1'
)
echo
echo "== $repeat round(s), interleaved, cold caches"
for ((r = 1; r <= repeat; r++)); do
  for ((i = 0; i < ${#names[@]}; i++)); do
    name=${names[(i + r - 1) % ${#names[@]}]}
    dir=$work/server-r$r-$name state=$work/state log=$work/$name-r$r.log
    rm -rf "$state" && mkdir -p "$state"
    server_start "$dir"
    printf '[tus]\nurl = "%s"\n\n[device]\nid = "bench"\n' "$server_url" >"$work/ingest.toml"
    sync && { ((EUID != 0)) || echo 3 >/proc/sys/vm/drop_caches; } && sleep "$settle"
    "$ingest" --version >/dev/null 2>&1; "$py" -c 'import tusclient.client' # the programs warm, not the data
    export work ingest py repo card server_url state log
    before=$(server_cpu) status=0
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" timeout --foreground -k 10 "$timeout" bash -c "${cmd[$name]}" || status=$?
    after=$(server_cpu)
    ((status == 0)) || { tail -20 "$log" >&2; die "$name failed with exit status $status (log: $log)"; }
    read -r e u s m < <(grep -E '^[0-9.]+ [0-9.]+ [0-9.]+ [0-9]+$' "$work/time")
    check "$name" "$dir"
    server_stop
    rm -rf "$dir" "$state"
    secs[$name]+="$e " cpu[$name]+="$(calc "$u + $s") " srv[$name]+="$(calc "$after - $before") "
    rss[$name]=$((m > ${rss[$name]:-0} ? m : ${rss[$name]:-0}))
    printf '  run %d/%d  %-7s %7.2f s  %6.2f CPU s  %5d MiB  server %6.2f CPU s\n' "$r" "$repeat" "$name" \
      "$e" "$(calc "$u + $s")" $((m / 1024)) "$(calc "$after - $before")"
  done
done

declare -A med=() medcpu=() medsrv=() rate=()
for name in "${names[@]}"; do
  med[$name]=$(median "${secs[$name]}") medcpu[$name]=$(median "${cpu[$name]}") medsrv[$name]=$(median "${srv[$name]}")
  rate[$name]=$(calc "$card_bytes / $mib / ${med[$name]}")
done
echo
echo "## Upload to tus, mixed: $(numfmt --to=iec "$card_bytes") ($files × 4 MiB + 1 × $big), median of $repeat cold-cache run(s)"
echo
echo "| contender | wall s | CPU s (user+sys) | peak RSS MiB | MiB/s | server CPU s |"
echo "|---|--:|--:|--:|--:|--:|"
for name in "${names[@]}"; do
  printf '| %s | %.2f | %.2f | %.1f | %.0f | %.2f |\n' "$name" "${med[$name]}" "${medcpu[$name]}" \
    "$(calc "${rss[$name]} / 1024")" "${rate[$name]}" "${medsrv[$name]}"
done
printf '| ingest / tuspy | %.2f× | %.2f× | %.2f× | %.2f× | %.2f× |\n' "$(calc "${med[ingest]} / ${med[tuspy]}")" \
  "$(calc "${medcpu[ingest]} / ${medcpu[tuspy]}")" "$(calc "${rss[ingest]} / ${rss[tuspy]}")" \
  "$(calc "${rate[ingest]} / ${rate[tuspy]}")" "$(calc "${medsrv[ingest]} / ${medsrv[tuspy]}")"
echo
echo "Peak RSS: the highest of the runs. Server CPU s: tuspyserver's user+sys (one Python process under" \
  "uvicorn) during the run, the median: near the wall time, the server bounds the run, not the client." \
  "Both clients send 16 MiB PATCHes; tuspy one file after another (its uploader has no concurrency)."
echo "Versions: $("$ingest" --version 2>&1); tuspy $("$py" -c 'import importlib.metadata as m; print(m.version("tuspy"))');" \
  "tuspyserver $("$py" -c 'import importlib.metadata as m; print(m.version("tuspyserver"))');" \
  "uvicorn $("$py" -c 'import importlib.metadata as m; print(m.version("uvicorn"))')."
echo "Server: tuspyserver under uvicorn on 127.0.0.1, data on $(findmnt -no SOURCE,FSTYPE -T "$work" | head -1 | tr -s ' ');" \
  "card: a plain directory on $(stat -f -c %T "$card"); $(nproc) cores."
