# shellcheck shell=bash
# Sourced, not run: a sample card as a real file system, for the demo and the benchmarks (root
# only): an ext4 image on a loop device, mounted at a folder; released by what was set up here.
#
#   card_mount IMAGE DIR BYTES LABEL [LOSETUP-OPTION...]
#       makes IMAGE room for BYTES of files (plus 20% and 64 MiB for ext4's own), attaches it
#       (losetup with the options given, e.g. --direct-io=on), formats it ext4 with LABEL and
#       mounts it at DIR. Sets card_loopdev, card_mnt and card_image. Returns 1, saying so on
#       stderr, when no loop device can be had: DIR stays a plain directory.
#   card_release   unmounts and detaches what card_mount set up and deletes its image (call it
#                  from an EXIT trap)
#   card_image_dir BYTES FALLBACK
#       where an image for BYTES of files goes when the card must be a device of its own, whose
#       reads no write on the station's disk slows: CARD_DIR when the caller's environment sets
#       it, else /dev/shm when it is a tmpfs with room for the image and 2 GiB to spare, else
#       FALLBACK

card_loopdev="" card_mnt="" card_image=""

# card_image_mib BYTES: the image's size for BYTES of files, in MiB.
card_image_mib() { echo $(($1 * 12 / 10 / 1048576 + 64)); }

card_mount() {
  local image=$1 dir=$2 bytes=$3 label=$4
  shift 4
  card_image=$image
  truncate -s "$(card_image_mib "$bytes")M" "$image" || return 1
  card_loopdev=$(losetup -f --show "$@" "$image") || {
    card_loopdev=""
    echo "$(basename "$0"): no loop device; the card is a plain directory" >&2
    return 1
  }
  mkfs.ext4 -q -F -m 0 -L "$label" "$card_loopdev" && mount "$card_loopdev" "$dir" && card_mnt=$dir
}

card_release() {
  [[ -n $card_mnt ]] && mountpoint -q "$card_mnt" && { umount "$card_mnt" || umount -l "$card_mnt"; }
  [[ -n $card_loopdev ]] && losetup -d "$card_loopdev"
  [[ -n $card_image ]] && rm -f "$card_image"
  card_mnt="" card_loopdev="" card_image=""
}

card_image_dir() {
  local bytes=$1 fallback=$2 free
  if [[ -n ${CARD_DIR:-} ]]; then echo "$CARD_DIR"; return; fi
  if [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]]; then
    free=$(df -B1 --output=avail /dev/shm | tail -1)
    if ((free > ($(card_image_mib "$bytes") + 2048) * 1048576)); then echo /dev/shm; return; fi
  fi
  echo "$fallback"
}
