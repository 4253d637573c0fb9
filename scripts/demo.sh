#!/usr/bin/env bash
# Demo: builds a sample drone card — an ext4 image on a loop device labelled DEMO_CARD and
# mounted read-only when root, a plain directory otherwise — starts a local SeaweedFS S3 server
# on 127.0.0.1 (scripts/weed.sh) with a bucket `demo`, ingests the card into it, ingests it again
# (nothing is copied or uploaded twice), shows `ingest status` and `ingest ls`, and checks three
# objects end to end: downloaded with aws and compared with xxh128sum of the file on the card;
# then one object's tags and metadata. Cleans up after itself, always (SeaweedFS included).
#   env: INGEST (binary, default .build/release/ingest), BIG (video size, default 256M),
#        STATE (state dir, default out/demo-state, emptied first and kept for a look),
#        VENV (default .venv: weed and aws)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest}
venv=${VENV:-$repo/.venv}
big=${BIG:-256M}
state=${STATE:-$repo/out/demo-state}
photos=40 max_mib=4   # make-card.sh's defaults, for sizing the image
bucket=demo scene=demo-flight tag=site=lab
VENV=$venv source "$repo/scripts/weed.sh"   # weed_start, weed_wait, weed_stop, weed_s3

section() { printf '\n=== %s ===\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }
[[ -x $ingest ]] || die "no $ingest; run 'make release' first"
[[ -x $venv/bin/weed && -x $venv/bin/aws ]] || die "no weed or aws in $venv; run 'make venv' first"

# Only this demo's settings: nothing from the machine's AWS or ingest configuration.
while read -r var; do unset "$var"; done < <(compgen -e | grep -E '^(AWS_|INGEST_)' || true)

work=$(mktemp -d "${TMPDIR:-/var/tmp}/ingest-demo.XXXXXX")
source "$repo/scripts/loop-card.sh"   # card_mount, card_release
udevd_pid=""
cleanup() {
  set +e
  weed_stop                                  # only the SeaweedFS this demo started
  [[ -n $udevd_pid ]] && kill "$udevd_pid"   # only the udevd this demo started
  card_release
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

section "Making a sample card"
card=$work/card
mkdir -p "$card"
if ((EUID == 0)); then
  b=${big%B}
  data=$(($(numfmt --from=iec "${b%i}") + (photos + 1) * max_mib * 1048576))
  card_mount "$work/card.img" "$card" "$data" DEMO_CARD || true
fi
if [[ -n $card_mnt ]]; then
  echo "$card_loopdev ($(numfmt --to=iec "$(blockdev --getsize64 "$card_loopdev")"), ext4, label DEMO_CARD) mounted at $card"
  bash "$repo/scripts/make-card.sh" "$card" --big "$big"
  mount -o remount,ro "$card"
  echo "remounted read-only"
  # Let udev record the card's UUID and label, as it would for a real card (a nicety).
  if [[ -x /lib/systemd/systemd-udevd ]] && ! udevadm control --ping -t 2 2>/dev/null; then
    mkdir -p /run/udev
    /lib/systemd/systemd-udevd 2>/dev/null &
    udevd_pid=$!
    for _ in $(seq 50); do udevadm control --ping -t 1 2>/dev/null && break; sleep 0.1; done
  fi
  udevadm trigger --action=add --subsystem-match=block >/dev/null 2>&1 || true
  udevadm settle --timeout=10 || true
  udevadm info --query=property --name="$card_loopdev" 2>/dev/null | grep -E '^ID_FS_(UUID|LABEL|TYPE)=' || true
else
  bash "$repo/scripts/make-card.sh" "$card" --big "$big"
fi

section "Starting SeaweedFS (a local S3 server) on 127.0.0.1"
# Credentials made for this run only, in the environment as the AWS tools read them; never shown.
secret() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }
export AWS_ACCESS_KEY_ID=demo-$(secret 8) AWS_SECRET_ACCESS_KEY=$(secret 24)
export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
weed_start "$work/weed" "$work/weed.log" demo
weed_wait 60 || die "SeaweedFS did not answer on $weed_endpoint within 60 s"
endpoint=$weed_endpoint
echo "SeaweedFS (pid $weed_pid) on $endpoint, data in $work/weed/data; credentials made for this run"
echo "\$ aws --endpoint-url $endpoint s3api create-bucket --bucket $bucket"
weed_s3 s3api create-bucket --bucket "$bucket" >/dev/null
weed_s3 s3api head-bucket --bucket "$bucket" >/dev/null || die "bucket $bucket was not created"
echo "bucket $bucket created"

# This station's configuration: its id goes on every object; parts of 8 MiB, so that the
# video goes as a multipart upload (files below 16 MiB go in one PUT).
export INGEST_CONFIG=$work/ingest.toml
cat >"$INGEST_CONFIG" <<'EOF'
[device]
id = "demo-station"

[upload]
part_size = "8MiB"
EOF
rm -rf "$state"
run=("$card" --endpoint "$endpoint" --bucket "$bucket" --state-dir "$state" --scene "$scene" --tag "$tag")

section "$("$ingest" --version)"
echo "INGEST_CONFIG=$INGEST_CONFIG:"
sed 's/^/  /' "$INGEST_CONFIG"
echo "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION=$AWS_REGION: in the environment"

section "First run: every new file is copied, fingerprinted and uploaded"
echo "\$ ingest ${run[*]}"
status=0
"$ingest" "${run[@]}" || status=$?
echo "(exit status $status)"
# Special files, links, litter and odd names are reported, not errors; every regular file on
# this card is readable, so anything but 0 is a real failure.
((status == 0)) || die "the first run failed with exit status $status"

section "Second run (--json): nothing is read, copied or uploaded again"
echo "\$ ingest ${run[*]} --json"
status=0
"$ingest" "${run[@]}" --json | tee "$work/second.ndjson" || status=$?
((status == 0)) || die "the second run failed with exit status $status"
summary=$(grep '"event":"summary"' "$work/second.ndjson") || die "the second run printed no summary"
[[ $summary == *'"staged":0,'* ]] || die "the second run staged files again"
[[ $summary == *'"uploaded":0,'* ]] || die "the second run uploaded files again"

section "ingest status"
echo "\$ ingest status --state-dir $state"
"$ingest" status --state-dir "$state"

section "What landed: ingest ls"
echo "\$ ingest ls --endpoint $endpoint --bucket $bucket"
"$ingest" ls --endpoint "$endpoint" --bucket "$bucket"
"$ingest" ls --endpoint "$endpoint" --bucket "$bucket" --json >"$work/ls.ndjson"

section "Checking three objects end to end: download with aws, xxh128sum against the card"
# An object holding a file's content is found by the fingerprint ingest stored with it (every
# file has its own object; the first that holds the content will do), downloaded, and its
# bytes hashed again.
key_of() {  # key_of HASH: the key of the object whose recorded xxh128 is HASH
  "$venv/bin/python" -c '
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    o = json.loads(line)
    if o.get("xxh128") == sys.argv[2]:
        print(o["key"])
        break' "$work/ls.ndjson" "$1"
}
video=DCIM/100MEDIA/DJI_$(printf %04d $((photos + 1))).MP4
for file in DCIM/100MEDIA/DJI_0001.JPG "$video" "MISC/Flight log – été.txt"; do
  hash=$(xxh128sum <"$card/$file" | cut -d' ' -f1)
  key=$(key_of "$hash")
  [[ -n $key ]] || die "$file: no object in bucket $bucket holds its content ($hash)"
  rm -f "$work/download"
  weed_s3 s3api get-object --bucket "$bucket" --key "$key" "$work/download" >/dev/null \
    || die "$file: cannot download s3://$bucket/$key"
  [[ $(xxh128sum <"$work/download" | cut -d' ' -f1) == "$hash" ]] \
    || die "s3://$bucket/$key does not hash to $hash, the fingerprint of $file"
  printf 'ok  %s  %s  =  s3://%s/%s\n' "$hash" "$file" "$bucket" "$key"
done

key=$(key_of "$(xxh128sum <"$card/$video" | cut -d' ' -f1)")
section "The video's object tags (get-object-tagging)"
echo "\$ aws --endpoint-url $endpoint s3api get-object-tagging --bucket $bucket --key '$key'"
weed_s3 s3api get-object-tagging --bucket "$bucket" --key "$key" --query 'TagSet[].[Key, Value]' --output text
section "The video's metadata (head-object; an ETag ending -N: N parts)"
echo "\$ aws --endpoint-url $endpoint s3api head-object --bucket $bucket --key '$key'"
weed_s3 s3api head-object --bucket "$bucket" --key "$key" \
  --query '{ContentLength: ContentLength, ContentType: ContentType, ETag: ETag, Metadata: Metadata}'

section "Done"
weed_stop
echo "SeaweedFS stopped (its data goes with $work)."
echo "State kept in $state: try '$ingest status --state-dir $state'"
