#!/usr/bin/env bash
# Builds the Debian package of a release build of ingest (`make deb`, which checks that
# BINARY is one): ingest_<version>_<arch>.deb in DEB_DIR, then lints it.
#
# The files are the ones `make install` puts in place (PREFIX=/usr, DESTDIR the package's
# root), so the two never list them twice; then what a Debian package has besides: the
# cron file as /etc/cron.d/ingest, man pages compressed, shell completions, the copyright
# and changelog, Depends from dpkg-shlibdeps, the conffiles and md5sums, and the
# maintainer scripts of packaging/deb/. The state directory, /var/lib/ingest, is not in the
# package: systemd (StateDirectory=) or ingest makes it, and purging never removes it.
#
# Environment (from the Makefile): BINARY, VERSION (from IngestVersion.swift), DEB_DIR,
# DEB_COMPRESSION (dpkg-deb options), MAKE.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

: "${BINARY:?}" "${VERSION:?}" "${DEB_DIR:=out}" "${DEB_COMPRESSION:=}" "${MAKE:=make}"
say() { echo "deb: $*"; }
die() { echo "deb: $*" >&2; exit 1; }

# The binary is the version the source says: a stale build would be packaged as another.
line=$("$BINARY" --version)
[[ "$line" == "ingest $VERSION "* ]] \
  || die "$BINARY says '$line', the source says $VERSION (Sources/IngestKit/Values/IngestVersion.swift): build it again"

# Timestamps and the changelog's date from the last commit, so that a build is reproducible.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

mkdir -p "$DEB_DIR"
work=$(mktemp -d "$DEB_DIR/.deb-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps and dpkg-gencontrol read debian/control and debian/changelog and find the
# package's files in debian/<package>, as in a source package.
mkdir -p "$work/debian"
root="$work/debian/ingest"
umask 022

# The binary without its symbols and debug information, as dh_strip leaves it.
strip --remove-section=.comment --remove-section=.note --strip-unneeded -o "$work/ingest" "$BINARY"

"$MAKE" --no-print-directory install DESTDIR="$root" PREFIX=/usr BINARY="$work/ingest" >/dev/null
rmdir "$root/var/lib/ingest" "$root/var/lib" "$root/var"

doc="$root/usr/share/doc/ingest"
install -D -m 0644 "$doc/ingest.cron" "$root/etc/cron.d/ingest"
gzip -9n "$root/usr/share/man/man1/ingest.1" "$root/usr/share/man/man5/ingest.toml.5"
install -m 0644 packaging/deb/copyright "$doc/copyright"

# The completions swift-argument-parser generates, where each shell looks for a package's.
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
# bash-completion sources the file: no #! line.
"$work/ingest" --generate-completion-script bash | sed '1{/^#!/d}' >"$root/usr/share/bash-completion/completions/ingest"
"$work/ingest" --generate-completion-script zsh >"$root/usr/share/zsh/vendor-completions/_ingest"
"$work/ingest" --generate-completion-script fish >"$root/usr/share/fish/vendor_completions.d/ingest.fish"
chmod 0644 "$root"/usr/share/{bash-completion/completions/ingest,zsh/vendor-completions/_ingest,fish/vendor_completions.d/ingest.fish}

# A native package's changelog (the project is its own upstream): one entry, this version;
# the changes themselves are the project's history.
maintainer=$(sed -n 's/^Maintainer: //p' packaging/deb/control)
cat >"$work/debian/changelog" <<EOF
ingest ($VERSION) unstable; urgency=medium

  * ingest $VERSION, built from commit $commit; the changes are in the
    project's git history.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
EOF
gzip -9n <"$work/debian/changelog" >"$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
cp packaging/deb/control "$work/debian/control"

install -d "$root/DEBIAN"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
# Every file under /etc is a conffile: dpkg keeps an administrator's changes on upgrade
# and removes the files on purge.
(cd "$root" && find etc -type f -printf '/%p\n' | sort) >"$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' | sort -z \
  | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

(cd "$work" && dpkg-shlibdeps -Tdebian/ingest.substvars debian/ingest/usr/bin/ingest \
  && dpkg-gencontrol -v"$VERSION" -pingest -Pdebian/ingest -Tdebian/ingest.substvars -fdebian/files)

# No file newer than the commit, as dh_builddeb clamps them.
find "$root" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0r touch --no-dereference --date="@$SOURCE_DATE_EPOCH"
output=$(dpkg-deb --root-owner-group $DEB_COMPRESSION --build "$root" "$DEB_DIR")
echo "$output"
deb=$(sed -n "s/.*building package 'ingest' in '\(.*\)'\..*/\1/p" <<<"$output")
[[ -f "$deb" ]] || die "dpkg-deb did not say where it built the package: $output"

# No error and no warning: a warning to leave would need an override shipped in
# /usr/share/lintian/overrides/ingest, saying why. (Informational tags are left: the
# binary's own hardening flags, words in its embedded libraries' strings.)
say "lintian $deb"
lintian --fail-on error,warning "$deb"
say "built $deb ($(du -h "$deb" | cut -f1)): Depends: $(dpkg-deb -f "$deb" Depends)"
