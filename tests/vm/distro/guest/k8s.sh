# The Kubernetes node's helpers, for the trixie-k8s scenarios (sourced
# after lib.sh). Settings: K8S_WAIT (seconds to wait for kubelet and each
# pod, default 300).
WAIT=${K8S_WAIT:-300}
M=/etc/kubernetes/manifests
# wait_for SECONDS DESCRIPTION COMMAND...: runs COMMAND every second until
# it succeeds or SECONDS passed; says how long it took
wait_for() {
    w=$1; d=$2; shift 2
    t=$(cut -d. -f1 /proc/uptime)
    while :; do
        "$@" >/dev/null 2>&1 && { info "$d after $(( $(cut -d. -f1 /proc/uptime) - t ))s"; return 0; }
        [ $(( $(cut -d. -f1 /proc/uptime) - t )) -ge "$w" ] && { info "$d: not within ${w}s"; return 1; }
        sleep 1
    done
}
# healthz: kubelet's health endpoint says ok
healthz() { python3 -c 'import urllib.request,sys; sys.exit(0 if urllib.request.urlopen("http://127.0.0.1:10248/healthz", timeout=5).read() == b"ok" else 1)'; }
# cid NAME: the id of the running container NAME (crictl)
cid() { crictl ps --state running --name "^$1\$" -q 2>/dev/null | head -n1; }
running() { [ -n "$(cid "$1")" ]; }
# movable_left CPUS: how many IRQs allowed on CPUS the kernel lets move
# (its exit status): the write to 0-1 is tried, each one that took is
# named; an IRQ the kernel refuses to move stays and is not counted
movable_left() {
    n=0
    for d in /proc/irq/[0-9]*; do
        a=$(cat "$d/smp_affinity_list" 2>/dev/null) || continue
        meets "$a" "$1" || continue
        if echo 0-1 >"$d/smp_affinity_list" 2>/dev/null; then
            info "  IRQ ${d#/proc/irq/} ($a) was movable, and left on $1"; n=$((n + 1))
        fi
    done
    return $n
}
# pod_manifest NAME CONTAINER [--cpus N --memory M] [--annotation K=V]...
# [--privileged-usr]: a static pod's manifest on stdout, on the host
# network (no CNI on these nodes), from the node's busybox image, its
# container printing its Cpus_allowed_list then sleeping. --cpus/--memory
# make it Guaranteed (requests equal to limits); without them it is
# BestEffort. --privileged-usr: privileged (SCHED_FIFO, mlock) and the
# node's /usr read-only at /host/usr (cyclictest; busybox has none).
pod_manifest() {
    pm_name=$1 pm_ctr=$2; shift 2
    pm_cpus= pm_mem= pm_notes= pm_usr=
    while [ $# -gt 0 ]; do
        case $1 in
            --cpus) pm_cpus=$2; shift 2 ;;
            --memory) pm_mem=$2; shift 2 ;;
            --annotation) pm_notes="$pm_notes    ${2%%=*}: \"${2#*=}\"
"; shift 2 ;;
            --privileged-usr) pm_usr=1; shift ;;
            *) echo "pod_manifest: unknown option $1" >&2; return 2 ;;
        esac
    done
    printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: default\n' "$pm_name"
    [ -n "$pm_notes" ] && printf '  annotations:\n%s' "$pm_notes"
    printf 'spec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n'
    printf '  - name: %s\n    image: localhost/busybox:cpushield\n    imagePullPolicy: Never\n' "$pm_ctr"
    printf '    command: ["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status; exec sleep 2147483647"]\n'
    [ -n "$pm_usr" ] && printf '    securityContext: {privileged: true}\n    volumeMounts: [{name: usr, mountPath: /host/usr, readOnly: true}]\n'
    [ -n "$pm_cpus" ] && printf '    resources:\n      requests: {cpu: "%s", memory: %s}\n      limits: {cpu: "%s", memory: %s}\n' "$pm_cpus" "$pm_mem" "$pm_cpus" "$pm_mem"
    [ -n "$pm_usr" ] && printf '  volumes: [{name: usr, hostPath: {path: /usr}}]\n'
    return 0
}
