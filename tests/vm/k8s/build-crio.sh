#!/usr/bin/env bash
# Builds (once, cached) CRI-O for the CRI-O Kubernetes node test bed
# (suite trixie-crio), from its Go module only, on this machine, statically
# linked: nothing is installed and nothing runs here.
#   tests/vm/k8s/build-crio.sh [--force]
# crio: from the module github.com/cri-o/cri-o (CRIO_VERSION, default
# v1.34.0). `go install MODULE@VERSION` stops at the proxy's deprecation
# lookup of that module, so the module is fetched with `go mod download`,
# its directory copied out of the (read-only) module cache and built there
# with its own go.mod: CGO_ENABLED=0, the tags of a build without gpgme,
# ostree, btrfs and devicemapper (containers_image_openpgp
# containers_image_ostree_stub exclude_graphdriver_btrfs
# exclude_graphdriver_devicemapper). Without cgo and without the seccomp,
# apparmor and selinux tags CRI-O runs no seccomp profile, no AppArmor and
# no SELinux of its own (said in its log; the test bed needs none); the
# overlay graph driver works without cgo (no project quota). The build date
# goes in with -ldflags as its Makefile does (internal/version.buildDate;
# the version is a constant in the source).
# pinns: CRI-O's helper that pins a pod's namespaces (pinns/src/*.c in the
# same module), with gcc -static as its own Makefile does.
# Output: tests/vm/cache/k8s/bin/{crio,pinns,crio.version} and
# crio-versions.txt (a file of its own: versions.txt is kubelet's and
# crictl's, rewritten by build-kubelet.sh, and part of trixie-k8s's image
# hash); the module copy and logs in tests/vm/cache/k8s/build/. Go modules
# come from the configured GOPROXY (the module and build caches are Go's
# own). About 1.5-3 minutes on 2 cores from a cold build cache.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
FORCE=0
[ "${1:-}" = --force ] && FORCE=1
CRIO_VERSION=${CRIO_VERSION:-v1.34.0}
need_cmd go gcc
K8S_DIR=$CACHE_DIR/k8s
BIN=$K8S_DIR/bin
B=$K8S_DIR/build
mkdir -p "$BIN" "$B"
export GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false
TAGS="containers_image_openpgp containers_image_ostree_stub exclude_graphdriver_btrfs exclude_graphdriver_devicemapper"

if [ $FORCE = 1 ] || ! [ -x "$BIN/crio" ] || ! [ -x "$BIN/pinns" ] || [ "$(cat "$BIN/crio.version" 2>/dev/null)" != "$CRIO_VERSION" ]; then
    t0=$(date +%s)
    W=$B/crio-$CRIO_VERSION
    go_module_src github.com/cri-o/cri-o "$CRIO_VERSION" "$W" "$B/crio.log"
    [ -f "$W/src/cmd/crio/main.go" ] || die "no cmd/crio in the module github.com/cri-o/cri-o@$CRIO_VERSION"
    t1=$(date +%s)
    log "crio $CRIO_VERSION: module ready ($((t1 - t0))s); go build (CGO_ENABLED=0, a minute or two on 2 cores)"
    (cd "$W/src" && CGO_ENABLED=0 go build -trimpath -tags "$TAGS" \
        -ldflags "-s -w -X github.com/cri-o/cri-o/internal/version.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
        -o "$BIN/crio.new" ./cmd/crio) >>"$B/crio.log" 2>&1 \
        || { tail -30 "$B/crio.log" >&2; die "go build crio failed (log: $B/crio.log)"; }
    t2=$(date +%s)
    # pinns as pinns/Makefile builds it (-static), stripped
    (cd "$W/src/pinns" && gcc -std=c99 -Os -O3 -Wall -Wextra -static -o "$BIN/pinns.new" src/*.c && strip -s "$BIN/pinns.new") >>"$B/crio.log" 2>&1 \
        || { tail -30 "$B/crio.log" >&2; die "building pinns failed (log: $B/crio.log)"; }
    mv "$BIN/crio.new" "$BIN/crio"
    mv "$BIN/pinns.new" "$BIN/pinns"
    echo "$CRIO_VERSION" >"$BIN/crio.version"
    log "crio $CRIO_VERSION built: $(du -h "$BIN/crio" | cut -f1), pinns $(du -h "$BIN/pinns" | cut -f1); module $((t1 - t0))s, build $((t2 - t1))s"
    echo "crio $CRIO_VERSION module $((t1 - t0))s build $((t2 - t1))s on $(nproc) CPUs, $(date -u +%Y-%m-%d)" >"$B/crio.timing"
    rm -rf "$W/src"
fi
{
    echo "crio $(cat "$BIN/crio.version") $(sha256sum "$BIN/crio" | cut -c1-16)"
    echo "pinns $(cat "$BIN/crio.version") $(sha256sum "$BIN/pinns" | cut -c1-16)"
} >"$BIN/crio-versions.txt"
echo "$BIN"
