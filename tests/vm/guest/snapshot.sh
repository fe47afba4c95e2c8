#!/bin/sh
# Snapshot of everything cpushield may touch, one fact per line, sorted, so
# that two snapshots can be compared (guest/compare.sh).  Line kinds:
#   task <tid> <start> cpus=<list> cg=<cgroup(s)> # <tgid> <name>
#        (keyed by tid+start time; the name after '#' is informational)
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
    f = t "/stat"; st = ""
    if ((getline line < f) > 0) {        # start time: field 22, after the ")"
        rest = substr(line, match(line, /\) /) + 2)
        n = split(rest, a, " "); st = a[20]
    }
    close(f)
    f = t "/cgroup"; cg = ""
    while ((getline line < f) > 0) {
        # v1 lines "N:ctrl:/path": keep cpuset only (others are not ours)
        if (line ~ /^0::/ || line ~ /:cpuset:/) cg = cg (cg == "" ? "" : ";") line
    }
    close(f)
    n = split(t, a, "/")
    printf "task %s %s cpus=%s cg=%s # %s %s\n", a[5], st, cpus, cg, tgid, name
}
{ one($0) }' /tmp/.snap.tasks.$me 2>/dev/null
rm -f /tmp/.snap.tasks.$me

# --- IRQs
for d in /proc/irq/[0-9]*; do
    [ -f "$d/smp_affinity_list" ] || continue
    echo "irq ${d##*/} $(cat "$d/smp_affinity_list" 2>/dev/null)"
done

# --- files (absent ones are skipped; a file that appears or vanishes shows as a difference)
show() { for f in "$@"; do [ -f "$f" ] && [ -r "$f" ] && echo "file $f $(tr '\n' ' ' <"$f" 2>/dev/null | sed 's/ *$//')"; done; }
show /proc/irq/default_smp_affinity /sys/devices/virtual/workqueue/cpumask
show /sys/bus/workqueue/devices/*/cpumask /sys/bus/workqueue/devices/*/numa
show /proc/sys/kernel/sched_rt_runtime_us /proc/sys/kernel/sched_rt_period_us \
     /proc/sys/vm/stat_interval /proc/sys/vm/dirty_writeback_centisecs \
     /proc/sys/kernel/timer_migration /proc/sys/vm/overcommit_memory
[ -n "${SNAP_WATCHDOG:-}" ] && show /proc/sys/kernel/watchdog /proc/sys/kernel/nmi_watchdog
show /sys/devices/system/cpu/online /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor \
     /sys/devices/system/machinecheck/machinecheck*/check_interval
show /sys/class/net/*/queues/rx-*/rps_cpus /sys/class/net/*/queues/tx-*/xps_cpus

# --- cgroups: every directory and its cpuset / control files
for root in /sys/fs/cgroup /sys/fs/cgroup/cpuset; do
    [ -d "$root" ] || continue
    find "$root" -type d 2>/dev/null | while read -r d; do
        case $d in /sys/fs/cgroup/cpuset*) [ "$root" = /sys/fs/cgroup ] && continue ;; esac
        echo "cgdir $d"
        for f in "$d"/cpuset.* "$d"/cgroup.subtree_control "$d"/cgroup.type "$d"/notify_on_release; do
            case $f in *cpuset.memory_pressure) continue ;; esac   # a live gauge
            [ -f "$f" ] && [ -r "$f" ] && echo "file $f $(tr '\n' ' ' <"$f" 2>/dev/null | sed 's/ *$//')"
        done
    done
done
