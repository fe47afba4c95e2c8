#!/usr/bin/env bash
# mmdebstrap customize hook of the trixie-k8s image (distro/image.sh):
# puts the Kubernetes node into the root file system ROOT on this machine,
# without running anything of it here:
#   customize.sh ROOT BIN-DIR
# BIN-DIR holds kubelet and crictl (tests/vm/k8s/build-kubelet.sh). The OCI
# images (busybox, pause) are made from the image's own busybox-static and
# imported in the guest at every boot (k8s-images.service, before kubelet).
set -euo pipefail
R=${1:?usage: customize.sh ROOT BIN-DIR}
BIN=${2:?bin dir}
N=$(cd "$(dirname "$0")" && pwd)/node
install -m 0755 "$BIN/kubelet" "$BIN/crictl" "$R/usr/local/bin/"
install -m 0755 "$N/k8s-images-import" "$R/usr/local/sbin/"
install -m 0644 "$N/kubelet.service" "$N/k8s-images.service" "$R/etc/systemd/system/"
mkdir -p "$R/etc/containerd" "$R/etc/kubernetes/manifests" "$R/var/lib/kubelet" \
    "$R/var/lib/cpushield-k8s/images" "$R/etc/nri/conf.d" "$R/opt/nri/plugins"
install -m 0644 "$N/containerd-config.toml" "$R/etc/containerd/config.toml"
install -m 0644 "$N/kubelet-config.yaml" "$R/etc/kubernetes/kubelet-config.yaml"
install -m 0644 "$N/crictl.yaml" "$R/etc/crictl.yaml"
bash "$(dirname "$0")/node-images.sh" "$R" "$BIN/versions.txt"
chroot "$R" systemctl enable kubelet.service k8s-images.service containerd.service
