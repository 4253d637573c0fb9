#!/usr/bin/env bash
# Demo: builds a sample drone card — an ext4 image on a loop device labelled DEMO_CARD and
# mounted read-only when root, a plain directory otherwise — ingests it, ingests it again
# (nothing is copied twice), shows `ingest status`, and checks three staged copies with
# xxh128sum against their content-addressed names. Cleans up after itself, always.
#   env: INGEST (binary, default .build/release/ingest), BIG (video size, default 256M),
#        STATE (state dir, default out/demo-state, emptied first and kept for a look)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ingest=${INGEST:-$repo/.build/release/ingest}
big=${BIG:-256M}
state=${STATE:-$repo/out/demo-state}
photos=40 max_mib=4   # make-card.sh's defaults, for sizing the image

section() { printf '\n=== %s ===\n' "$*"; }
[[ -x $ingest ]] || { echo "demo: no $ingest; run 'make release' first" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/var/tmp}/ingest-demo.XXXXXX")
mnt="" loopdev="" udevd_pid=""
cleanup() {
  set +e
  [[ -n $udevd_pid ]] && kill "$udevd_pid"   # only the udevd this demo started
  [[ -n $mnt ]] && mountpoint -q "$mnt" && { umount "$mnt" || umount -l "$mnt"; }
  [[ -n $loopdev ]] && losetup -d "$loopdev"
  rm -rf "$work"
}
trap cleanup EXIT

section "Making a sample card"
card=$work/card
mkdir -p "$card"
if ((EUID == 0)); then
  b=${big%B}
  data=$(($(numfmt --from=iec "${b%i}") + (photos + 1) * max_mib * 1048576))
  truncate -s $((data * 12 / 10 / 1048576 + 64))M "$work/card.img"   # data + 20% + ext4's own
  loopdev=$(losetup -f --show "$work/card.img") || { loopdev=""; echo "demo: no loop device; using a directory" >&2; }
fi
if [[ -n $loopdev ]]; then
  mkfs.ext4 -q -F -m 0 -L DEMO_CARD "$loopdev"
  mount "$loopdev" "$card" && mnt=$card
  echo "$loopdev ($(numfmt --to=iec "$(blockdev --getsize64 "$loopdev")"), ext4, label DEMO_CARD) mounted at $card"
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
  udevadm info --query=property --name="$loopdev" 2>/dev/null | grep -E '^ID_FS_(UUID|LABEL|TYPE)=' || true
else
  bash "$repo/scripts/make-card.sh" "$card" --big "$big"
fi

rm -rf "$state"
section "$("$ingest" --version)"
section "First run: every new file is copied and fingerprinted in one pass"
echo "\$ ingest $card --state-dir $state"
"$ingest" "$card" --state-dir "$state"

section "Second run (--json): nothing is read or copied again"
echo "\$ ingest $card --state-dir $state --json"
"$ingest" "$card" --state-dir "$state" --json | tee "$work/second.ndjson"
grep -q '"event":"summary".*"staged":0,' "$work/second.ndjson" \
  || { echo "demo: the second run staged files again" >&2; exit 1; }

section "ingest status"
"$ingest" status --state-dir "$state"

section "Checking three staged copies with xxh128sum"
for file in DCIM/100MEDIA/DJI_0001.JPG "DCIM/100MEDIA/DJI_$(printf %04d $((photos + 1))).MP4" "MISC/Flight log – été.txt"; do
  hash=$(xxh128sum <"$card/$file" | cut -d' ' -f1)
  staged=$state/staging/${hash:0:2}/$hash
  [[ -f $staged ]] || { echo "demo: $file: no staged copy $staged" >&2; exit 1; }
  [[ $(xxh128sum <"$staged" | cut -d' ' -f1) == "$hash" ]] \
    || { echo "demo: $staged does not hash to its name" >&2; exit 1; }
  printf 'ok  %s  %s\n' "$hash" "$file"
done

section "Done"
echo "State kept in $state: try '$ingest status --state-dir $state'"
