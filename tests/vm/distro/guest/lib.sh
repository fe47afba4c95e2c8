# Helpers for the distribution scenarios (sourced): checks, the results
# protocol, and what a shield must hold, measured with the guest's own
# tools rather than with cpushield's reports.
S=$1
OUT=/results/$S
mkdir -p "$OUT"
FAILS=0
T0=$(cut -d. -f1 /proc/uptime)
el() { echo "$(( $(cut -d. -f1 /proc/uptime) - T0 ))s"; }
info() { echo "  [$(el)] $*"; }
note() { echo "CPUSHIELD-NOTE: $*"; }
check() { # check DESCRIPTION COMMAND...
    d=$1; shift
    if "$@"; then echo "  ok   $d [$(el)]"; else echo "  FAIL $d [$(el)]"; FAILS=$((FAILS + 1)); fi
}
result() {
    if [ "$FAILS" = 0 ]; then echo "CPUSHIELD-RESULT: PASS $S"; else echo "CPUSHIELD-RESULT: FAIL $S ($FAILS checks failed)"; fi
    exit 0
}
cs() { # cs ARGS: runs cpushield; output in $OUT/cs.out, exit code in CS_RC
    info "cpushield $*"
    /job/cpushield "$@" >"$OUT/cs.out" 2>&1; CS_RC=$?
    sed 's/^/    | /' "$OUT/cs.out"
}
# in_set CPU LIST: whether CPU is in the cpulist LIST (e.g. 0-1,3)
in_set() {
    echo "$2" | tr ',' '\n' | while IFS=- read -r a b; do
        [ -z "$b" ] && b=$a
        [ "$1" -ge "$a" ] && [ "$1" -le "$b" ] && echo y && break
    done | grep -q y
}
# meets LIST SHIELD: whether two cpulists share a CPU
meets() {
    for c in $(expand "$1"); do in_set "$c" "$2" && return 0; done
    return 1
}
expand() { echo "$1" | tr ',' '\n' | while IFS=- read -r a b; do seq "$a" "${b:-$a}"; done; }
# Threads outside the shield cgroup allowed on SHIELD, except per-CPU
# kernel threads (allowed on one CPU) and tasks that asked only for
# shielded CPUs: "pid tid comm cpus cgroup" lines.
thread_leaks() {
    sh_list=$1
    for st in /proc/[0-9]*/task/[0-9]*/status; do
        d=${st%/status}
        cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$st" 2>/dev/null) || continue
        [ -n "$cpus" ] || continue
        meets "$cpus" "$sh_list" || continue
        cg=$(cut -d: -f3 "$d/cgroup" 2>/dev/null | tail -n1)
        case $cg in /cpushield*) continue ;; esac
        comm=$(cat "$d/comm" 2>/dev/null)
        # per-CPU kthreads: on one CPU only
        case $cpus in *[-,]*) ;; *) [ "$(sed -n 's/^PPid:[[:space:]]*//p' "$st")" = 2 ] && continue ;; esac
        pid=$(sed -n 's/^Tgid:[[:space:]]*//p' "$st")
        echo "$pid ${d##*/} $comm $cpus $cg"
    done
}
# IRQs whose smp_affinity_list meets SHIELD: "irq list" lines
irq_on() {
    for f in /proc/irq/[0-9]*/smp_affinity_list; do
        l=$(cat "$f"); meets "$l" "$1" && { n=${f#/proc/irq/}; echo "${n%%/*} $l"; }
    done
}
# The state a shield must give back: thread affinities by command name,
# IRQs, cgroup tree and controllers, unit properties, irqbalance, sysctls.
snap() { # snap NAME
    f=$OUT/snap.$1
    {
        for st in /proc/[0-9]*/task/[0-9]*/status; do
            c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$st" 2>/dev/null)
            n=$(sed -n 's/^Name:[[:space:]]*//p' "$st" 2>/dev/null)
            [ -n "$c" ] && echo "task $n $c"
        done | sort | uniq -c | sed 's/^ *//'
        for f2 in /proc/irq/[0-9]*/smp_affinity_list; do echo "irq $f2 $(cat "$f2")"; done
        echo "default_smp_affinity $(cat /proc/irq/default_smp_affinity)"
        echo "wq $(cat /sys/devices/virtual/workqueue/cpumask 2>/dev/null)"
        echo "root.subtree_control $(cat /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null)"
        (cd /sys/fs/cgroup && find . -maxdepth 2 -type d | grep -v 'cs-probe\|run-' | sort | sed 's/^/cgdir /')
        for u in -.slice init.scope system.slice user.slice; do
            echo "unit $u $(systemctl show -p AllowedCPUs -p EffectiveCPUs -- "$u" | tr '\n' ' ')"
        done
        echo "irqbalance $(systemctl is-active irqbalance) $(tr '\0' '\n' </proc/"$(systemctl show -p MainPID --value irqbalance)"/environ 2>/dev/null | grep BANNED)"
        find /run/systemd/system /run/systemd/system.control /run/systemd/transient -name '*cpushield*' 2>/dev/null | sed 's/^/runfile /'
        for k in kernel/sched_rt_runtime_us vm/stat_interval kernel/timer_migration; do echo "sysctl $k $(cat /proc/sys/$k)"; done
    } >"$f"
}
# snap_equal A B DESCRIPTION: checks two snapshots match (shows the difference)
snap_equal() {
    if diff "$OUT/snap.$1" "$OUT/snap.$2" >"$OUT/diff.$1.$2"; then
        check "$3" true
    else
        sed 's/^/    /' "$OUT/diff.$1.$2" | head -n 40
        check "$3" false
    fi
}
# refused_cpu CPU: a new service asking for CPU by itself (taskset) is refused by the kernel
service_may_run_on() {
    systemd-run --quiet --wait --collect -p Type=oneshot --unit="cs-probe-$$-$1" taskset -c "$1" true >/dev/null 2>&1
}
