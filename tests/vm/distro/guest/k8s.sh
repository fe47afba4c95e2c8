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
