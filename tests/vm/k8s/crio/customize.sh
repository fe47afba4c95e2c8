#!/usr/bin/env bash
# mmdebstrap customize hook of the trixie-crio image (distro/image.sh): the
# Kubernetes node of trixie-k8s (the same kubelet, crictl, OCI images and
# KubeletConfiguration, from ../node/) with CRI-O in place of containerd,
# put into the root file system ROOT on this machine without running
# anything of it here:
#   customize.sh ROOT BIN-DIR
# BIN-DIR holds kubelet and crictl (../build-kubelet.sh), crio and pinns
# (../build-crio.sh). kubelet's files are trixie-k8s's own with the runtime's
# socket and units changed by sed. The OCI images go into containers-storage
# at every boot (crio-images.service: skopeo, before CRI-O: the overlay
# graph driver mounts, so it cannot run in the chroot here).
set -euo pipefail
R=${1:?usage: customize.sh ROOT BIN-DIR}
BIN=${2:?bin dir}
K=$(cd "$(dirname "$0")/.." && pwd)
N=$K/node
C=$K/crio
SOCK=unix:///run/crio/crio.sock
install -m 0755 "$BIN/kubelet" "$BIN/crictl" "$BIN/crio" "$BIN/pinns" "$R/usr/local/bin/"
install -m 0755 "$C/crio-images-import" "$R/usr/local/sbin/"
install -m 0644 "$C/crio.service" "$C/crio-images.service" "$R/etc/systemd/system/"
sed -e 's/containerd\.service/crio.service/g' -e 's/k8s-images\.service/crio-images.service/g' \
    "$N/kubelet.service" >"$R/etc/systemd/system/kubelet.service"
mkdir -p "$R/etc/crio/crio.conf.d" "$R/etc/containers" "$R/etc/kubernetes/manifests" "$R/var/lib/kubelet" \
    "$R/var/lib/cpushield-k8s/images" "$R/etc/nri/conf.d" "$R/opt/nri/plugins" "$R/etc/cni/net.d" \
    "$R/var/lib/containers/storage" "$R/var/log/crio/pods"
install -m 0644 "$C/crio.conf" "$R/etc/crio/crio.conf.d/10-cpushield.conf"
install -m 0644 "$C/storage.conf" "$C/policy.json" "$R/etc/containers/"
# kubelet's configuration: trixie-k8s's, on CRI-O's socket (CRI-O's
# cgroup_manager is systemd, as kubelet's cgroupDriver)
sed -e "s|^containerRuntimeEndpoint: .*|# trixie-crio: CRI-O's socket (its cgroup_manager is systemd)\ncontainerRuntimeEndpoint: $SOCK|" \
    "$N/kubelet-config.yaml" >"$R/etc/kubernetes/kubelet-config.yaml"
grep -q "^containerRuntimeEndpoint: $SOCK\$" "$R/etc/kubernetes/kubelet-config.yaml"
sed -e "s|unix:///run/containerd/containerd.sock|$SOCK|" "$N/crictl.yaml" >"$R/etc/crictl.yaml"
grep -q "crio.sock" "$R/etc/crictl.yaml"
# the images (their file names are their names in containers-storage,
# localhost/NAME:cpushield, for crio-images-import)
bash "$K/node-images.sh" "$R" "$BIN/versions.txt" "$BIN/crio-versions.txt"
chroot "$R" systemctl enable kubelet.service crio-images.service crio.service
