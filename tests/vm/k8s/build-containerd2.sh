#!/usr/bin/env bash
# Builds (once, cached) containerd 2.x for the containerd 2 Kubernetes node
# test bed (suite trixie-k8s2), from its Go module only, on this machine,
# statically linked: nothing is installed and nothing runs here.
#   tests/vm/k8s/build-containerd2.sh [--force]
# containerd, containerd-shim-runc-v2 and ctr: from the module
# github.com/containerd/containerd/v2 (CONTAINERD2_VERSION, default v2.2.9:
# the newest 2.2 release the proxy serves; its go.mod says go 1.25.0, CRI
# v1 as kubelet 1.34 speaks it). As for CRI-O (build-crio.sh) the module is
# fetched with `go mod download`, its directory copied out of the
# (read-only) module cache and built there with its own go.mod:
# CGO_ENABLED=0 and the tags of its Makefile's static release
# (urfave_cli_no_docs osusergo netgo static_build) plus no_btrfs,
# no_devmapper and no_zfs (snapshotters the test bed does not use; btrfs
# needs cgo anyway); the shim with no_grpc as its Makefile builds it. The
# version goes in with -ldflags as its Makefile does (version.Version,
# version.Revision: the module's version, the proxy gives no commit;
# version.Package). runc is Debian's (the image's package).
# Output: tests/vm/cache/k8s/bin/containerd2/{containerd,
# containerd-shim-runc-v2,ctr,version} and bin/containerd2-versions.txt (a
# file of its own: versions.txt is kubelet's and crictl's and part of
# trixie-k8s's image hash); the module copy and log in
# tests/vm/cache/k8s/build/. Go modules come from the configured GOPROXY
# (the module and build caches are Go's own). About 3-4 minutes on 2 cores
# from a cold build cache.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
FORCE=0
[ "${1:-}" = --force ] && FORCE=1
CONTAINERD2_VERSION=${CONTAINERD2_VERSION:-v2.2.9}
need_cmd go
K8S_DIR=$CACHE_DIR/k8s
BIN=$K8S_DIR/bin
OUT=$BIN/containerd2
B=$K8S_DIR/build
mkdir -p "$OUT" "$B"
export GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false CGO_ENABLED=0
PKG=github.com/containerd/containerd/v2
TAGS="urfave_cli_no_docs osusergo netgo static_build no_btrfs no_devmapper no_zfs"
CMDS="containerd containerd-shim-runc-v2 ctr"

have_all() { for c in $CMDS; do [ -x "$OUT/$c" ] || return 1; done; }
if [ $FORCE = 1 ] || ! have_all || [ "$(cat "$OUT/version" 2>/dev/null)" != "$CONTAINERD2_VERSION" ]; then
    t0=$(date +%s)
    W=$B/containerd-$CONTAINERD2_VERSION
    go_module_src "$PKG" "$CONTAINERD2_VERSION" "$W" "$B/containerd2.log"
    [ -f "$W/src/cmd/containerd/main.go" ] || die "no cmd/containerd in the module $PKG@$CONTAINERD2_VERSION"
    t1=$(date +%s)
    log "containerd $CONTAINERD2_VERSION: module ready ($((t1 - t0))s); go build (CGO_ENABLED=0, a few minutes on 2 cores)"
    ld="-s -w -X $PKG/version.Version=$CONTAINERD2_VERSION -X $PKG/version.Revision=$CONTAINERD2_VERSION-module -X $PKG/version.Package=$PKG"
    for c in $CMDS; do
        tags=$TAGS
        [ "$c" = containerd-shim-runc-v2 ] && tags="$TAGS no_grpc"
        (cd "$W/src" && go build -trimpath -tags "$tags" -ldflags "$ld" -o "$OUT/$c.new" "./cmd/$c") >>"$B/containerd2.log" 2>&1 \
            || { tail -30 "$B/containerd2.log" >&2; die "go build $c failed (log: $B/containerd2.log)"; }
    done
    for c in $CMDS; do mv "$OUT/$c.new" "$OUT/$c"; done
    echo "$CONTAINERD2_VERSION" >"$OUT/version"
    t2=$(date +%s)
    log "containerd $CONTAINERD2_VERSION built: $(cd "$OUT" && du -h $CMDS | awk '{printf "%s %s, ", $2, $1}')module $((t1 - t0))s, build $((t2 - t1))s"
    echo "containerd $CONTAINERD2_VERSION module $((t1 - t0))s build $((t2 - t1))s on $(nproc) CPUs, $(date -u +%Y-%m-%d)" >"$B/containerd2.timing"
    rm -rf "$W/src"
fi
for c in $CMDS; do echo "$c $(cat "$OUT/version") $(sha256sum "$OUT/$c" | cut -c1-16)"; done >"$BIN/containerd2-versions.txt"
echo "$OUT"
