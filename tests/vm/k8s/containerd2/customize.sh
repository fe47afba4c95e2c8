#!/usr/bin/env bash
# mmdebstrap customize hook of the trixie-k8s2 image (distro/image.sh): the
# Kubernetes node of trixie-k8s (the same kubelet, crictl, OCI images,
# image import, kubelet and crictl configuration, from ../node/) with
# containerd 2.x in place of Debian's containerd 1.7, put into the root
# file system ROOT on this machine without running anything of it here:
#   customize.sh ROOT BIN-DIR CONTAINERD2-DIR
# BIN-DIR holds kubelet and crictl (../build-kubelet.sh), CONTAINERD2-DIR
# containerd, containerd-shim-runc-v2 and ctr (../build-containerd2.sh),
# which go to /usr/local/bin with containerd's own unit (containerd.service,
# the name the node's units and the scenarios use) and a configuration in
# containerd 2's format (config.toml: version 3). runc is Debian's. The
# node's files need no sed: containerd 2 keeps its socket
# (/run/containerd/containerd.sock) and the k8s.io namespace, and ctr is
# on the units' PATH (/usr/local/bin).
set -euo pipefail
R=${1:?usage: customize.sh ROOT BIN-DIR CONTAINERD2-DIR}
BIN=${2:?bin dir}
CD2=${3:?containerd2 dir}
K=$(cd "$(dirname "$0")/.." && pwd)
N=$K/node
C=$K/containerd2
install -m 0755 "$BIN/kubelet" "$BIN/crictl" "$R/usr/local/bin/"
install -m 0755 "$CD2/containerd" "$CD2/containerd-shim-runc-v2" "$CD2/ctr" "$R/usr/local/bin/"
install -m 0755 "$N/k8s-images-import" "$R/usr/local/sbin/"
install -m 0644 "$N/kubelet.service" "$N/k8s-images.service" "$C/containerd.service" "$R/etc/systemd/system/"
mkdir -p "$R/etc/containerd" "$R/etc/kubernetes/manifests" "$R/var/lib/kubelet" \
    "$R/var/lib/cpushield-k8s/images" "$R/etc/nri/conf.d" "$R/opt/nri/plugins" "$R/etc/cni/net.d"
install -m 0644 "$C/config.toml" "$R/etc/containerd/config.toml"
# kubelet's configuration: trixie-k8s's (containerd's socket, the systemd
# cgroup driver)
install -m 0644 "$N/kubelet-config.yaml" "$R/etc/kubernetes/kubelet-config.yaml"
install -m 0644 "$N/crictl.yaml" "$R/etc/crictl.yaml"
bash "$K/node-images.sh" "$R" "$BIN/versions.txt" "$BIN/containerd2-versions.txt"
chroot "$R" systemctl enable kubelet.service k8s-images.service containerd.service
