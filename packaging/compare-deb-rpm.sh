#!/usr/bin/env bash
# Checks that the .deb and the .rpm ship the same files, with the same
# modes and sizes, so that the two packages cannot drift apart:
#
#   packaging/compare-deb-rpm.sh DEB RPM
#
# Regular files only (each package owns the directories its distribution
# expects). The differences packaging/stage-tree.sh makes on purpose are
# mapped here, and nothing else may differ: the zsh completion's directory,
# the copyright file's and the licence texts' place (and the copyright
# file's Apache License pointer, so its size),
# and Debian's changelog.Debian.gz (the .rpm's changelog is in its header).
# Prints the difference and exits 1 if they differ. Needs dpkg-deb and rpm.
set -euo pipefail

[[ $# == 2 ]] || { echo "usage: $0 DEB RPM" >&2; exit 2; }
deb=$1 rpm=$2
for tool in dpkg-deb rpm; do
    command -v "$tool" >/dev/null || { echo "compare-deb-rpm: $tool is missing" >&2; exit 2; }
done

# "MODE SIZE PATH" for every regular file, as the .rpm would install it.
from_deb() {
    dpkg-deb -c "$deb" | awk '$1 ~ /^-/ { path = substr($6, 2); print $1, $3, path }' \
        | sed -e '\| /usr/share/doc/cpushield/changelog\.Debian\.gz$|d' \
              -e 's| /usr/share/zsh/vendor-completions/_cpushield$| /usr/share/zsh/site-functions/_cpushield|' \
              -e 's|^\([^ ]*\) [0-9]* /usr/share/doc/cpushield/copyright$|\1 - /usr/share/licenses/cpushield/copyright|' \
              -e 's| /usr/share/doc/cpushield/\(LICENSE-[A-Z]*\)$| /usr/share/licenses/cpushield/\1|'
}
from_rpm() {
    rpm -qp --qf '[%{FILEMODES:perms} %{FILESIZES} %{FILENAMES}\n]' "$rpm" | awk '$1 ~ /^-/' \
        | sed -e 's|^\([^ ]*\) [0-9]* /usr/share/licenses/cpushield/copyright$|\1 - /usr/share/licenses/cpushield/copyright|'
}

deb_list=$(from_deb | sort)
rpm_list=$(from_rpm | sort)
[[ -n $deb_list ]] || { echo "compare-deb-rpm: no files in $deb" >&2; exit 1; }
if [[ $deb_list != "$rpm_list" ]]; then
    echo "compare-deb-rpm: the .deb and the .rpm ship different files (< .deb, > .rpm):" >&2
    diff <(echo "$deb_list") <(echo "$rpm_list") >&2 || true
    exit 1
fi
echo "compare-deb-rpm: the same $(wc -l <<<"$deb_list") files, modes and sizes in $(basename "$deb") and $(basename "$rpm")"
