#!/bin/sh
# Snapshot of everything cpushield may touch, one fact per line, sorted, so
# that two snapshots can be compared (guest/compare.sh).  Line kinds:
#   task <tid> <start> cpus=<list> cg=<cgroup(s)> # <tgid> <name>
#        (keyed by tid+start time; the name after '#' is informational;
#        irq/N-* threads and PF_NO_SETAFFINITY kthreads show cpus=~: the
#        kernel alone sets their CPUs)
#   irq <n> <smp_affinity_list>        effective affinity is not compared
#   file <path> <content>              cpuset / workqueue / irq / knob files
#   cgdir <path>                       every cgroup directory
# This snapshot's own processes (this shell and its children) are left out.
me=$$

# --- tasks: one awk over every thread's status, stat and cgroup file
for t in /proc/[0-9]*/task/[0-9]*; do
    echo "$t"
done >/tmp/.snap.tasks.$me
awk -v me="$me" '
function one(t,   line, f, name, tgid, ppid, cpus, st, cg, rest, n, a) {
    f = t "/status"; name = tgid = ppid = cpus = ""
    while ((getline line < f) > 0) {
        if (line ~ /^Name:/) { name = line; sub(/^Name:[ \t]*/, "", name) }
        else if (line ~ /^Tgid:/) { split(line, a, /[ \t]+/); tgid = a[2] }
        else if (line ~ /^PPid:/) { split(line, a, /[ \t]+/); ppid = a[2] }
        else if (line ~ /^Cpus_allowed_list:/) { split(line, a, /[ \t]+/); cpus = a[2] }
    }
    close(f)
    if (cpus == "") return               # exited meanwhile
    if (tgid == me || ppid == me) return # this snapshot itself
    f = t "/stat"; st = ""; fl = 0
    if ((getline line < f) > 0) {        # after the ")": flags (field 9), start time (22)
        rest = substr(line, match(line, /\) /) + 2)
        n = split(rest, a, " "); st = a[20]; fl = a[7] + 0
    }
    close(f)
    f = t "/cgroup"; cg = ""
    while ((getline line < f) > 0) {
        # v1 lines "N:ctrl:/path": keep cpuset only (others are not ours)
        if (line ~ /^0::/ || line ~ /:cpuset:/) cg = cg (cg == "" ? "" : ";") line
    }
    close(f)
    # Until cgroup2 is first mounted the kernel prints no "0::" line, and
    # after that it always does (KERNEL-NOTES 31): every task is in the
    # root of the default hierarchy either way.
    if (cg !~ /(^|;)0::/) cg = cg (cg == "" ? "" : ";") "0::/"

    n = split(t, a, "/")
    # irq/N-* threads follow their IRQ effective affinity, which the kernel
    # changes only at the next interrupt: compare the IRQ, not the thread.
    if (name ~ /^irq\//) { name = name " (cpus " cpus ", not compared)"; cpus = "~" }
    # PF_NO_SETAFFINITY (0x04000000) threads: no one in user space can set
    # their CPUs; the kernel moves them itself (e.g. 6.1 rescuers re-affined
    # by any write to the workqueue cpumask): not compared either.
    else if (int(fl / 67108864) % 2) { name = name " (cpus " cpus ", kernel-managed, not compared)"; cpus = "~" }
    printf "task %s %s cpus=%s cg=%s # %s %s\n", a[5], st, cpus, cg, tgid, name
}
{ one($0) }' /tmp/.snap.tasks.$me 2>/dev/null
rm -f /tmp/.snap.tasks.$me

# --- IRQs (effective affinity is not compared: it moves at the next interrupt)
awk 'FNR == 1 { n = split(FILENAME, a, "/"); print "irq", a[4], $0 }' /proc/irq/[0-9]*/smp_affinity_list 2>/dev/null

# --- files: one awk over all of them (absent ones are skipped; a file that
# appears or vanishes shows as a difference).  Multi-line files are joined.
files() {
    echo /proc/irq/default_smp_affinity /sys/devices/virtual/workqueue/cpumask
    echo /sys/bus/workqueue/devices/*/cpumask /sys/bus/workqueue/devices/*/numa
    echo /proc/sys/kernel/sched_rt_runtime_us /proc/sys/kernel/sched_rt_period_us \
         /proc/sys/vm/stat_interval /proc/sys/vm/dirty_writeback_centisecs \
         /proc/sys/kernel/timer_migration /proc/sys/vm/overcommit_memory \
         /proc/sys/kernel/hung_task_timeout_secs
    # reading the watchdog knobs while the watchdog is off was seen to break
    # re-enabling it: only on request
    [ -n "${SNAP_WATCHDOG:-}" ] && echo /proc/sys/kernel/watchdog /proc/sys/kernel/nmi_watchdog
    echo /sys/devices/system/cpu/online /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor \
         /sys/devices/system/machinecheck/machinecheck*/check_interval
    echo /proc/sys/kernel/numa_balancing /sys/kernel/mm/ksm/run \
         /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag \
         /sys/kernel/mm/transparent_hugepage/khugepaged/defrag
    echo /sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us \
         /sys/devices/system/cpu/cpu*/cpuidle/state*/disable
    echo /sys/class/net/*/queues/rx-*/rps_cpus /sys/class/net/*/queues/tx-*/xps_cpus
    # cgroups: every directory, its cpuset files and control files
    for root in /sys/fs/cgroup /sys/fs/cgroup/cpuset; do
        [ -d "$root" ] || continue
        find "$root" -type d 2>/dev/null | while read -r d; do
            case $d in /sys/fs/cgroup/cpuset*) [ "$root" = /sys/fs/cgroup ] && continue ;; esac
            echo "cgdir:$d"
            echo "$d"/cpuset.* "$d"/cgroup.subtree_control "$d"/cgroup.type "$d"/notify_on_release
        done
    done
}
files | tr ' ' '\n' | awk '
/^cgdir:/ { sub(/^cgdir:/, ""); print "cgdir " $0; next }
/\*/ || /cpuset\.memory_pressure$/ { next }   # unmatched globs; a live gauge
$0 != "" {
    f = $0; v = ""; n = 0
    r = (getline line < f)
    if (r < 0) next                           # absent or unreadable
    while (r > 0) { v = v (n++ ? " " : "") line; r = (getline line < f) }
    close(f)
    print "file " f " " v
}' 2>/dev/null
