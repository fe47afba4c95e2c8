#!/usr/bin/env bash
# Builds target/debian/cpushield_VERSION_amd64.deb: the static binary, its
# systemd units, man pages, shell completions, an example config and the
# maintainer scripts, then prints the path of the .deb.
#
#   packaging/build-deb.sh
#
# Environment: DEB_REVISION (default 1), DEB_MAINTAINER ("Name <mail>"),
# SOURCE_DATE_EPOCH (default: the last commit's time; makes the .deb
# reproducible), DEB_NOSTRIP=1 (ship the binary with its debug info).
# CPUSHIELD_BIN and CPUSHIELD_ASSETS package a binary and an assets
# directory built elsewhere instead of building them here.
#
# Why dpkg-deb and not cargo-deb: dpkg-deb comes with dpkg on every Debian
# system, while cargo-deb is not packaged for Debian 12 and would have to be
# compiled from crates.io on every fresh CI machine, for what is a short
# staging step here. The layout follows Debian policy by hand instead.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"

die() { echo "build-deb: $*" >&2; exit 1; }
for tool in cargo dpkg-deb gzip md5sum; do
    command -v "$tool" >/dev/null || die "$tool is missing"
done

# The version, commit, SOURCE_DATE_EPOCH, and the tree it shares with the
# .rpm (packaging/build-rpm.sh).
# shellcheck source=packaging/stage-tree.sh
. "$here/stage-tree.sh"
debversion="$version-${DEB_REVISION:-1}"
maintainer=${DEB_MAINTAINER:-cpushield maintainers <cpushield@localhost>}

out="$target_dir/debian"
stage="$out/cpushield_${debversion}_amd64"
deb="$out/cpushield_${debversion}_amd64.deb"
mkdir -p "$out"

# 1. The static binary, and the man pages and completions from the assets
#    example.
stage_inputs "$out"

# 2. The tree as installed (packaging/stage-tree.sh), with Debian's
#    changelog.
stage_tree deb "$stage" "$out"
cat <<EOF | gzip -9n >"$doc/changelog.Debian.gz"
cpushield ($debversion) unstable; urgency=medium

  * Built from commit $commit.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
EOF

# 3. Control files.
installed_size=$(du -sk "$stage" | cut -f1)
mkdir -m 0755 "$stage/DEBIAN"
# No Depends: the binary is static. The units use systemctl and busctl,
# which every systemd host has, and are inert without systemd.
cat >"$stage/DEBIAN/control" <<EOF
Package: cpushield
Version: $debversion
Architecture: amd64
Maintainer: $maintainer
Installed-Size: $installed_size
Section: admin
Priority: optional
Suggests: prometheus-node-exporter, stress-ng
Description: shield CPUs for real-time work, undo it exactly, prove it
 cpushield moves every other process, kernel thread, interrupt and unbound
 workqueue off chosen CPUs and has the kernel keep them off (a cgroup
 cpuset partition), journals every change so "cpushield off" restores the
 machine exactly, and measures latency shielded and unshielded under load.
 .
 The package changes nothing when installed or removed: the shield is
 applied by cpushield.service once it is enabled and configured in
 /etc/cpushield/cpushield.toml.
EOF
if [[ -d $stage/etc ]]; then
    (cd "$stage" && find etc -type f -printf '/%p\n' | sort) >"$stage/DEBIAN/conffiles"
fi
for script in postinst prerm postrm; do
    install -m 0755 "$here/debian/$script" "$stage/DEBIAN/$script"
done
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z \
    | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/md5sums"

# 4. The archive, with every timestamp clamped for reproducibility.
find "$stage" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
rm -f "$deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >&2
dpkg-deb --info "$deb" >&2
dpkg-deb --contents "$deb" >&2
if command -v lintian >/dev/null; then
    lintian --info "$deb" >&2 || echo "build-deb: lintian reported the findings above" >&2
fi
echo "$deb"
