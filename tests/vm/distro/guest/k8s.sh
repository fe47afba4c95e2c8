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
STATE=/var/lib/kubelet/cpu_manager_state
# pid_of CONTAINER-ID: its init's pid (crictl)
pid_of() { crictl inspect -o go-template --template '{{.info.pid}}' "$1" 2>/dev/null; }
# cgroup_of CONTAINER-ID: the container's cgroup directory (its init's)
cgroup_of() { cg_pid=$(pid_of "$1") && [ -n "$cg_pid" ] && echo "/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$cg_pid/cgroup")"; }
# allowed PID: the CPUs the kernel allows the process (Cpus_allowed_list)
allowed() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null; }
# gone NAME: no container NAME, running or exited (crictl)
gone() { [ -z "$(crictl ps -a --name "^$1\$" -q 2>/dev/null)" ]; }
# manager_state PYTHON-EXPRESSION-OF-j: a field of kubelet's cpu_manager_state
manager_state() {
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($1)" "$STATE" 2>/dev/null
}
# pods_on_their_cpus: the Guaranteed container ($RT, cgroup $RT_CG) on 2-3
# and the BestEffort one ($BE, $BE_CG) on the shared pool 0-1, by their
# cgroups' effective cpusets and the CPUs the kernel allows their processes
pods_on_their_cpus() {
    RT_EFF=$(cat "$RT_CG/cpuset.cpus.effective" 2>/dev/null); BE_EFF=$(cat "$BE_CG/cpuset.cpus.effective" 2>/dev/null)
    info "rt: cpuset.cpus '$(cat "$RT_CG/cpuset.cpus" 2>/dev/null)' effective '$RT_EFF'; be: cpuset.cpus '$(cat "$BE_CG/cpuset.cpus" 2>/dev/null)' effective '$BE_EFF'"
    check "rt's cgroup cpuset.cpus.effective is 2-3" [ "$RT_EFF" = 2-3 ]
    check "be's cgroup cpuset.cpus.effective is the shared pool 0-1" [ "$BE_EFF" = 0-1 ]
    RT_ALLOWED=$(allowed "$(pid_of "$RT")"); BE_ALLOWED=$(allowed "$(pid_of "$BE")")
    check "rt's process is allowed 2-3 only ($RT_ALLOWED)" [ "$RT_ALLOWED" = 2-3 ]
    check "be's process is allowed 0-1 only ($BE_ALLOWED)" [ "$BE_ALLOWED" = 0-1 ]
    info "rt's own first line: $(crictl logs "$RT" 2>&1 | head -n1); be's: $(crictl logs "$BE" 2>&1 | head -n1)"
}
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
