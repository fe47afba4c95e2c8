#!/usr/bin/env bash
# Writes a one-layer OCI image as an OCI layout in a tar, the form
# `ctr images import` takes, without any image tool (no registry, no
# umoci, no skopeo): the layer is a plain tar of a directory with a static
# busybox and its applet links; the config, the manifest and index.json are
# written here, each blob under blobs/sha256/<digest>.
#   tests/vm/k8s/oci-image.sh BUSYBOX NAME OUT.tar ENTRYPOINT-JSON
# BUSYBOX: a static busybox binary (Debian's busybox-static);
# NAME: the full reference the image gets in containerd
# (annotation io.containerd.image.name, e.g. localhost/busybox:cpushield);
# ENTRYPOINT-JSON: the config's Entrypoint, e.g. '["/bin/sh"]' (null: none).
# The tar is reproducible: the same busybox gives the same digests.
set -euo pipefail
BUSYBOX=${1:?usage: oci-image.sh BUSYBOX NAME OUT.tar ENTRYPOINT-JSON}
NAME=${2:?name}
OUT=${3:?out}
ENTRYPOINT=${4:-null}
if command -v file >/dev/null && ! file -L "$BUSYBOX" | grep -q 'static'; then
    echo "oci-image.sh: $BUSYBOX is not statically linked" >&2; exit 2
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/root/bin" "$T/root/etc" "$T/root/tmp" "$T/root/proc" "$T/root/sys" "$T/root/dev" \
    "$T/layout/blobs/sha256"
cp "$BUSYBOX" "$T/root/bin/busybox"
chmod 0755 "$T/root/bin/busybox"
for a in sh ash cat echo grep head ls ps sleep taskset nproc env true false id hostname; do
    ln -s busybox "$T/root/bin/$a"
done
chmod 1777 "$T/root/tmp"
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$T/root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$T/root/etc/group"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -cf "$T/layer.tar" -C "$T/root" .
# blob FILE MEDIATYPE -> a descriptor's fields "digest size"; the file
# goes to blobs/sha256/<digest>
blob() {
    local d s
    d=$(sha256sum "$1" | cut -d' ' -f1)
    s=$(stat -c %s "$1")
    cp "$1" "$T/layout/blobs/sha256/$d"
    echo "sha256:$d $s"
}
read -r LD LS < <(blob "$T/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Entrypoint":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"cpushield tests/vm/k8s/oci-image.sh: static busybox"}]}' \
    "$ENTRYPOINT" "$LD" >"$T/config.json"
read -r CD CS < <(blob "$T/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"%s","size":%s}]}' \
    "$CD" "$CS" "$LD" "$LS" >"$T/manifest.json"
read -r MD MS < <(blob "$T/manifest.json")
TAG=${NAME##*:}
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$MD" "$MS" "$NAME" "$TAG" >"$T/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$T/layout/oci-layout"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$OUT" -C "$T/layout" .
echo "$NAME $MD"
