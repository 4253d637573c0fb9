#!/usr/bin/env bash
# Installs the Debian packages that building, testing, the demo and the benchmarks need.
# Idempotent: asks apt only for what is missing, and runs `apt-get update` only then.
# Not root and something missing: prints the command to run, and exits 1.
set -euo pipefail

packages=(
  libxxhash-dev xxhash          # XXH3-128 library, and xxh128sum as the oracle
  libcurl4-openssl-dev          # HTTP transport
  libisal-dev                   # ISA-L crc32_iscsi: CRC32C part checksums, ~50 GB/s vs MD5's 0.75
  libudev-dev udev              # volume identity; systemd-udevd and udevadm for tests
  systemd                       # systemd-analyze: verify the shipped units, expand their syscall filters
  make                          # make install, run by the install tests
  libsqlite3-dev pkg-config     # journal; pkg-config finds the system libraries
  sqlite3                       # PRAGMA integrity_check of journals in make faults
  e2fsprogs util-linux          # mkfs.ext4, losetup, mount for card images
  strace time                   # syscall checks; GNU time for peak RSS
  xfsprogs                      # xfs_io, whose `shutdown` simulates a power cut (make faults)
  openssl                       # MD5 digests as the oracle in S3 tests
  man-db                        # man -l, to check the man pages render
  python3-venv                  # the venv for test tools from PyPI (make venv)
  rclone                        # a peer in make bench-upload (Debian 12 ships rclone 1.60)
  dpkg-dev lintian              # make deb: dpkg-shlibdeps, dpkg-gencontrol, strip; the package's lint
  ceph-mon ceph-osd radosgw ceph-common  # Ceph RGW 16 for the S3 compatibility matrix (scripts/rgw.sh):
                                # a one-node cluster on memstore, no systemd or kernel module needed
)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#packages[@]} Debian packages are installed"
  exit 0
fi

install_cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
if ((EUID != 0)); then
  echo "deps: missing Debian packages: ${missing[*]}" >&2
  echo "deps: run as root:  sudo sh -c '$install_cmd'" >&2
  exit 1
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
