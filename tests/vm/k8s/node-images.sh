#!/usr/bin/env bash
# The Kubernetes node images' common part, for each runtime's customize
# hook (k8s/customize.sh, k8s/crio/, k8s/containerd2/): the workload image
# and the sandbox image, one layer (the image's own static busybox) each,
# as OCI archives in ROOT/var/lib/cpushield-k8s/images (imported at boot by
# the runtime's import unit); the pause stand-in sleeps (as PID 1 it
# ignores SIGTERM: a runtime stops a sandbox with SIGKILL). The node's
# versions file is the VERSIONS files put together.
#   node-images.sh ROOT VERSIONS...
set -euo pipefail
R=${1:?usage: node-images.sh ROOT VERSIONS...}
shift
K=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$R/var/lib/cpushield-k8s/images"
bb=$R/usr/bin/busybox
[ -f "$bb" ] || bb=$R/bin/busybox
bash "$K/oci-image.sh" "$bb" localhost/busybox:cpushield \
    "$R/var/lib/cpushield-k8s/images/busybox.tar" '["/bin/sh"]'
bash "$K/oci-image.sh" "$bb" localhost/pause:cpushield \
    "$R/var/lib/cpushield-k8s/images/pause.tar" '["/bin/sleep","2147483647"]'
cat "$@" >"$R/var/lib/cpushield-k8s/versions.txt"
