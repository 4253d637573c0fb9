#!/usr/bin/env bash
# Fills DIR with a sample drone card: DCIM photos of random data, one big video, a name
# with spaces and non-ASCII, a non-UTF-8 name, an empty file, a duplicate, OS litter,
# a FIFO and a symlink. Random data comes from openssl (AES-CTR, fast) or /dev/urandom.
#
#   make-card.sh DIR [--big SIZE] [--photos N] [--max-mib M]
#     --big SIZE   size of DCIM/100MEDIA/DJI_<N+1>.MP4 (default 256M; K/M/G suffixes, powers of 2)
#     --photos N   number of JPG files (default 40), 1..M MiB each (--max-mib, default 4)
set -euo pipefail

usage() { sed -n '2,9s/^# \{0,1\}//p' "$0" >&2; exit 64; }
(($# >= 1)) || usage
dir=$1; shift
big=256M photos=40 max_mib=4
while (($#)); do
  case $1 in
    --big) big=$2; shift 2 ;;
    --photos) photos=$2; shift 2 ;;
    --max-mib) max_mib=$2; shift 2 ;;
    *) usage ;;
  esac
done
big=${big%B}; big_bytes=$(numfmt --from=iec "${big%i}")  # 256M, 256MiB, 1G…

# random FILE BYTES: writes BYTES of incompressible, file-specific data.
random() {
  if command -v openssl >/dev/null; then
    head -c "$2" /dev/zero | openssl enc -aes-128-ctr -nosalt -pbkdf2 -iter 1 -pass "pass:$1.$$.$SRANDOM" >"$1"
  else
    head -c "$2" /dev/urandom >"$1"
  fi
}

mkdir -p "$dir"/DCIM/100MEDIA "$dir"/DCIM/101MEDIA "$dir"/DCIM/PANORAMA/100_0001 "$dir"/MISC/backup "$dir"/.Trashes
RANDOM=42  # repeatable sizes
for ((i = 1; i <= photos; i++)); do
  name=$(printf 'DJI_%04d.JPG' "$i")
  case $((i % 8)) in
    0) sub=DCIM/PANORAMA/100_0001 ;;
    5) sub=DCIM/101MEDIA ;;
    *) sub=DCIM/100MEDIA ;;
  esac
  random "$dir/$sub/$name" $(((1 << 20) + RANDOM % ((max_mib - 1) * 1024 + 1) * 1024 + RANDOM % 1024))
done
random "$dir/DCIM/100MEDIA/$(printf 'DJI_%04d.MP4' $((photos + 1)))" "$big_bytes"

printf 'takeoff 10:02, landing 10:19, wind 4 m/s\n' >"$dir/MISC/Flight log – été.txt"
printf 'latin-1 name\n' >"$dir/MISC/caf"$'\xe9'".txt"         # not valid UTF-8
: >"$dir/MISC/EMPTY.TXT"                                         # zero bytes
first=$(find "$dir/DCIM" -name 'DJI_0001.JPG' -print -quit)
cp "$first" "$dir/MISC/backup/DJI_0001.JPG"                      # same content twice
head -c 4096 "$first" >"$dir/DCIM/100MEDIA/._DJI_0001.JPG"       # macOS litter
echo trash >"$dir/.Trashes/x"                                    # more litter
mkfifo "$dir/MISC/pipe"                                          # special file
ln -s ../DCIM/100MEDIA/DJI_0001.JPG "$dir/MISC/latest.jpg"       # symlink, never followed
sync -f "$dir/DCIM" 2>/dev/null || sync

echo "make-card: $dir: $photos photos, video $(numfmt --to=iec "$big_bytes"), $(du -sh --apparent-size "$dir" | cut -f1) in all"
