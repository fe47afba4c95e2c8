#!/usr/bin/env bash
# Builds (once, cached) the Kubernetes node binaries for the Kubernetes node
# test bed (issue #60), from Go modules only, on this machine, statically
# linked (CGO_ENABLED=0): nothing is installed and nothing runs here.
#   tests/vm/k8s/build-kubelet.sh [--force]
# kubelet: from the module k8s.io/kubernetes (KUBE_VERSION, default
# v1.34.4). That module's go.mod replaces its staging modules (k8s.io/api,
# apimachinery, client-go, component-base, ...) by ./staging/src/..., which
# a module zip does not hold, so a small wrapper module here requires
# k8s.io/kubernetes and replaces each staging module by its published
# version (v0.MINOR.PATCH), and its main.go is cmd/kubelet/kubelet.go. The
# version goes in with -ldflags as hack/lib/version.sh does (gitVersion,
# gitMajor, gitMinor, gitTreeState, buildDate; gitCommit is the module's
# version: the proxy gives no commit).
# crictl: sigs.k8s.io/cri-tools (CRICTL_VERSION, default v1.34.0), with
# go install MODULE@VERSION (its go.mod replaces nothing), its version set
# in its own package.
# Output: tests/vm/cache/k8s/bin/{kubelet,crictl} and versions.txt; the
# wrapper modules and logs in tests/vm/cache/k8s/build/. Go modules come
# from the configured GOPROXY (the module and build caches are Go's own).
# About 5-6 minutes on 2 cores for kubelet from a cold build cache.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
FORCE=0
[ "${1:-}" = --force ] && FORCE=1
KUBE_VERSION=${KUBE_VERSION:-v1.34.4}
CRICTL_VERSION=${CRICTL_VERSION:-v1.34.0}
need_cmd go
K8S_DIR=$CACHE_DIR/k8s
BIN=$K8S_DIR/bin
B=$K8S_DIR/build
mkdir -p "$BIN" "$B"
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false
STAGING="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms
kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
mount-utils pod-security-admission"

# kubelet
if [ $FORCE = 1 ] || ! [ -x "$BIN/kubelet" ] || [ "$(cat "$BIN/kubelet.version" 2>/dev/null)" != "$KUBE_VERSION" ]; then
    t0=$(date +%s)
    W=$B/kubelet-$KUBE_VERSION
    rm -rf "$W"; mkdir -p "$W"
    minor=${KUBE_VERSION#v1.}            # 34.4
    staging_version=v0.$minor            # v0.34.4
    {
        echo "module cpushield.test/k8s-node/kubelet"
        echo
        echo "go 1.24.0"
        echo
        echo "require k8s.io/kubernetes $KUBE_VERSION"
        echo
        echo "replace ("
        for m in $STAGING; do echo "	k8s.io/$m => k8s.io/$m $staging_version"; done
        echo ")"
    } >"$W/go.mod"
    log "kubelet $KUBE_VERSION: the wrapper module (staging modules at $staging_version)"
    (cd "$W" && go mod download k8s.io/kubernetes@"$KUBE_VERSION") >"$B/kubelet.log" 2>&1 \
        || { tail -20 "$B/kubelet.log" >&2; die "go mod download k8s.io/kubernetes@$KUBE_VERSION failed (log: $B/kubelet.log)"; }
    src=$(cd "$W" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
    cp "$src/cmd/kubelet/kubelet.go" "$W/main.go"
    chmod u+w "$W/main.go"
    # godebug as k8s.io/kubernetes has it
    sed -n 's/^godebug /godebug /p' "$src/go.mod" >>"$W/go.mod"
    (cd "$W" && go mod tidy) >>"$B/kubelet.log" 2>&1 \
        || { tail -30 "$B/kubelet.log" >&2; die "go mod tidy of the kubelet wrapper failed (log: $B/kubelet.log)"; }
    t1=$(date +%s)
    log "kubelet $KUBE_VERSION: modules ready ($((t1 - t0))s); go build (CGO_ENABLED=0, a few minutes on 2 cores)"
    ld=""
    for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
        ld="$ld -X '$p.gitVersion=$KUBE_VERSION' -X '$p.gitMajor=1' -X '$p.gitMinor=${minor%%.*}'"
        ld="$ld -X '$p.gitCommit=$KUBE_VERSION-module' -X '$p.gitTreeState=clean'"
        ld="$ld -X '$p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)'"
    done
    (cd "$W" && go build -trimpath -tags providerless -ldflags "-s -w $ld" -o "$BIN/kubelet.new" .) >>"$B/kubelet.log" 2>&1 \
        || { tail -30 "$B/kubelet.log" >&2; die "go build kubelet failed (log: $B/kubelet.log)"; }
    mv "$BIN/kubelet.new" "$BIN/kubelet"
    echo "$KUBE_VERSION" >"$BIN/kubelet.version"
    t2=$(date +%s)
    log "kubelet $KUBE_VERSION built: $(du -h "$BIN/kubelet" | cut -f1), modules $((t1 - t0))s, build $((t2 - t1))s"
    echo "kubelet $KUBE_VERSION modules $((t1 - t0))s build $((t2 - t1))s on $(nproc) CPUs, $(date -u +%Y-%m-%d)" >"$B/kubelet.timing"
fi

# crictl
if [ $FORCE = 1 ] || ! [ -x "$BIN/crictl" ] || [ "$(cat "$BIN/crictl.version" 2>/dev/null)" != "$CRICTL_VERSION" ]; then
    t0=$(date +%s)
    # cri-tools' go.mod has no replace directives: go install MODULE@VERSION
    # builds it with the dependencies its go.mod pins
    rm -rf "$B/crictl-gobin"; mkdir -p "$B/crictl-gobin"
    GOBIN=$B/crictl-gobin go install -trimpath \
        -ldflags "-s -w -X 'sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION'" \
        sigs.k8s.io/cri-tools/cmd/crictl@"$CRICTL_VERSION" >"$B/crictl.log" 2>&1 \
        || { tail -30 "$B/crictl.log" >&2; die "go install sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION failed (log: $B/crictl.log)"; }
    mv "$B/crictl-gobin/crictl" "$BIN/crictl.new"
    mv "$BIN/crictl.new" "$BIN/crictl"
    echo "$CRICTL_VERSION" >"$BIN/crictl.version"
    log "crictl $CRICTL_VERSION built: $(du -h "$BIN/crictl" | cut -f1) in $(( $(date +%s) - t0 ))s"
fi
{
    echo "kubelet $(cat "$BIN/kubelet.version") $(sha256sum "$BIN/kubelet" | cut -c1-16)"
    echo "crictl $(cat "$BIN/crictl.version") $(sha256sum "$BIN/crictl" | cut -c1-16)"
} >"$BIN/versions.txt"
echo "$BIN"
