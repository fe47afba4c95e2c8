#!/bin/sh
# A reference shield in busybox sh, used ONLY to check the test bed itself:
#   tests/vm/run.sh --binary tests/vm/guest/ref-shield.sh
# It implements just enough of the issue-2 CLI (on/off/status/run/move, v2
# partition or v1 rt/nrt cpusets, IRQs, workqueue mask, per-thread journal)
# to show that the scenarios can pass and that they fail when it is broken
# (REF_BREAK=noirq|norestore|nopartition).  It is not cpushield.
. /guest/lib.sh ref >/dev/null 2>&1 || exit 3
OUT=/run/ref; mkdir -p $OUT
J=/run/cpushield/journal
CG=/sys/fs/cgroup
err() { echo "cpushield(ref): $*" >&2; exit 1; }
jot() { echo "$*" >>$J; }
hexmask() { awk -v l="$1" "$AWK_CPULIB"' BEGIN { n = split(expand(l), x, " "); m = 0; for (i = 1; i <= n; i++) if (x[i] != "") { v = 1; for (j = 0; j < x[i]; j++) v *= 2; m += v }; printf "%x\n", m }'; }
parse() { # cpulist or hex -> canonical list, or error
    local l=$1
    case $l in 0x*|0X*) l=$(mask_to_list "${l#0?}") ;; esac
    echo "$l" | grep -Eq '^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$' || err "malformed CPU list '$1'"
    awk -v l="$l" "$AWK_CPULIB"' BEGIN { n = split(l, a, ","); for (i = 1; i <= n; i++) if (split(a[i], r, "-") == 2 && r[1] + 0 > r[2] + 0) exit 1 }' || err "bad range in '$1'"
    cpus_subset "$l" "$(all_cpus)" || err "CPUs $l are not all online ($(all_cpus))"
    [ -n "$(cpus_minus "$(all_cpus)" "$l")" ] || err "$l leaves no housekeeping CPU"
    echo "$l"
}
lock() {
    mkdir -p /run/cpushield
    if ! mkdir /run/cpushield/lock 2>/dev/null; then
        p=$(cat /run/cpushield/lock/pid 2>/dev/null)
        [ "$p" = $$ ] && return 0
        [ -n "$p" ] && [ -d /proc/$p ] && err "another cpushield is running ($p)"
        rm -rf /run/cpushield/lock; mkdir /run/cpushield/lock
    fi
    echo $$ >/run/cpushield/lock/pid
}
unlock() { rm -rf /run/cpushield/lock; }

do_on() {
    local sh hk hkmask n v name
    sh=$(parse "$1") || exit 1; shift
    local irqs_in=""
    while [ $# -gt 0 ]; do
        case $1 in --irq) n=$2; case $n in *[!0-9]*) n=$(irq_by_name "^$2\$") ;; esac; irqs_in="$irqs_in $n"; shift ;; --json) ;; esac
        shift
    done
    [ "$(cgroup_mode)" = none ] && err "no cpuset support"
    lock
    [ -s $J ] && { do_off >/dev/null; lock; }
    hk=$(cpus_minus "$(all_cpus)" "$sh"); hkmask=$(hexmask "$hk")
    # every thread's affinity and cgroup first (the snapshot's task lines),
    # into a temporary file renamed into place: a SIGKILL here leaves no
    # journal, and nothing has been changed yet
    sh /guest/snapshot.sh | awk '$1 == "task" { sub(/^cpus=/, "", $4); sub(/^cg=/, "", $5); sub(/^0::/, "", $5); sub(/^[0-9]*:cpuset:/, "", $5); print "task", $2, $3, $4, $5 }' >$J.tmp
    mv $J.tmp $J
    # the workqueue mask before the partition: on 6.12 the partition already
    # reduces it, and writing that reduced value back would make it stick
    f=/sys/devices/virtual/workqueue/cpumask
    if [ -f $f ]; then jot "file $f $(cat $f)"; echo $hkmask >$f 2>/dev/null || echo "workqueue cpumask refused"; fi
    if [ "$(cgroup_mode)" = v2 ]; then
        jot "subtree $CG $(cat $CG/cgroup.subtree_control)"
        echo +cpuset >$CG/cgroup.subtree_control
        jot "mkdir $CG/cpushield"
        mkdir $CG/cpushield
        echo "$sh" >$CG/cpushield/cpuset.cpus
        [ "${REF_BREAK:-}" = nopartition ] || echo isolated >$CG/cpushield/cpuset.cpus.partition
        v=$(cat $CG/cpushield/cpuset.cpus.partition)
        case $v in isolated) ;; *) echo "partition reads '$v'" >&2 ;; esac
    else
        local r=$CG/cpuset
        jot "mkdir $r/rt"; mkdir $r/rt
        jot "mkdir $r/nrt"; mkdir $r/nrt
        for d in rt nrt; do cat $r/cpuset.mems >$r/$d/cpuset.mems; done
        echo "$sh" >$r/rt/cpuset.cpus; echo "$hk" >$r/nrt/cpuset.cpus
        echo 1 >$r/rt/cpuset.cpu_exclusive
        jot "file $r/cpuset.sched_load_balance $(cat $r/cpuset.sched_load_balance)"
        echo 0 >$r/cpuset.sched_load_balance; echo 0 >$r/rt/cpuset.sched_load_balance; echo 1 >$r/nrt/cpuset.sched_load_balance
        for t in $(cat $r/tasks); do echo $t >$r/nrt/tasks 2>/dev/null; done
    fi
    # threads that still have shield CPUs (v1; or v2 tasks the kernel did not move)
    tasks_table | awk -v sh="$sh" "$AWK_CPULIB"' overlap($4, sh) { print $1, $4, $5 }' | while read -r tid cpus name; do
        nc=$(cpus_minus "$cpus" "$sh")
        if [ -n "$nc" ]; then taskset -p -c "$nc" $tid >/dev/null 2>&1 || echo "task $tid $name cannot leave the shield ($cpus)"
        else echo "task $tid $name lies wholly inside the shield ($cpus): left alone"; fi
    done
    jot "file /proc/irq/default_smp_affinity $(cat /proc/irq/default_smp_affinity)"
    echo $hkmask >/proc/irq/default_smp_affinity
    if [ "${REF_BREAK:-}" != noirq ]; then
        for n in $(irq_list); do
            v=$(cat /proc/irq/$n/smp_affinity_list); name=$(irq_name $n)
            case " $irqs_in " in *" $n "*) t=$sh ;; *) t=$hk ;; esac
            jot "file /proc/irq/$n/smp_affinity_list $v"
            echo "$t" 2>/dev/null >/proc/irq/$n/smp_affinity_list || echo "irq $n $name refused a new affinity (stays on $v)"
        done
    fi
    echo "shielded $sh"
    unlock
}
do_off() {
    lock
    [ -f $J ] || { echo "no shield"; unlock; return 0; }
    tac $J | while read -r kind a b c d; do
        case $kind in
            file) echo "$b" 2>/dev/null >"$a" ;;
            subtree) case " $b " in *" cpuset "*) ;; *) echo -cpuset >"$a/cgroup.subtree_control" 2>/dev/null ;; esac ;;
            mkdir) [ -d "$a" ] || continue
                   if [ -f "$a/tasks" ]; then p=${a%/*}; for t in $(cat "$a/tasks"); do echo $t >"$p/tasks" 2>/dev/null; done
                   else for t in $(cat "$a/cgroup.procs"); do echo $t >"${a%/*}/cgroup.procs" 2>/dev/null; done; fi
                   rmdir "$a" ;;
            task) ;;   # below, all at once
        esac
    done
    # tasks: restore only the threads (same tid and start time) that differ
    if [ "${REF_BREAK:-}" != norestore ]; then
        sh /guest/snapshot.sh | awk '$1 == "task" { sub(/^cpus=/, "", $4); sub(/^cg=/, "", $5); sub(/^0::/, "", $5); sub(/^[0-9]*:cpuset:/, "", $5); print "now", $2, $3, $4, $5 }' >$OUT/now
        awk '$1 == "task" { j[$2 " " $3] = $4 " " $5 } $1 == "now" && ($2 " " $3) in j && j[$2 " " $3] != ($4 " " $5) { print $2, j[$2 " " $3], $5 }' $J $OUT/now |
        while read -r tid cpus cg cur; do
            if [ "$cg" != "$cur" ]; then
                if [ "$(cgroup_mode)" = v2 ]; then echo $tid >"$CG$cg/cgroup.threads" 2>/dev/null || echo $tid >"$CG$cg/cgroup.procs" 2>/dev/null
                else echo $tid >"$CG/cpuset$cg/tasks" 2>/dev/null; fi
            fi
            taskset -p -c "$cpus" $tid >/dev/null 2>&1 || echo "could not restore $tid to $cpus"
        done
    fi
    rm -f $J
    echo "unshielded"
    unlock
}
shield_dir() { if [ "$(cgroup_mode)" = v2 ]; then echo $CG/cpushield; else echo $CG/cpuset/rt; fi; }
shield_cpus() { cat "$(shield_dir)/cpuset.cpus" 2>/dev/null; }
enter() { if [ "$(cgroup_mode)" = v2 ]; then echo $1 >$CG/cpushield/cgroup.procs; else for t in /proc/$1/task/*; do echo ${t##*/} >$CG/cpuset/rt/tasks; done; fi; }
cmd=$1; shift 2>/dev/null
case $cmd in
    on) [ $# -ge 1 ] || err "on needs a CPU list"; do_on "$@" ;;
    off) do_off ;;
    status) if [ -f $J ]; then echo "{ \"shielded\": \"$(shield_cpus)\", \"mechanism\": \"$(cgroup_mode)\" }"; else echo '{ "shielded": "" }'; fi ;;
    run) cpu=""; pol=""; while [ "$1" != -- ]; do case $1 in --cpu) cpu=$2; shift ;; --fifo) pol="-f $2"; shift ;; --rr) pol="-r $2"; shift ;; esac; shift; done; shift
         [ -f $J ] || err "no shield"
         enter $$
         [ -n "$cpu" ] || cpu=$(shield_cpus)
         taskset -p -c "$cpu" $$ >/dev/null
         if [ -n "$pol" ]; then exec chrt $pol "$@"; else exec "$@"; fi ;;
    move) pids=""; dir=""; while [ $# -gt 0 ]; do case $1 in --in) dir=in ;; --out) dir=out ;; *) pids="$pids $1" ;; esac; shift; done
          sh=$(shield_cpus); hk=$(cpus_minus "$(all_cpus)" "$sh")
          for p in $pids; do
              if [ $dir = in ]; then enter $p; c=$sh
              elif [ "$(cgroup_mode)" = v2 ]; then echo $p >$CG/cgroup.procs; c=$hk
              else for t in /proc/$p/task/*; do echo ${t##*/} >$CG/cpuset/nrt/tasks; done; c=$hk; fi
              for t in /proc/$p/task/*; do taskset -p -c "$c" ${t##*/} >/dev/null; done
          done ;;
    --help|-h|"") echo "reference shield for the test bed: on CPULIST | off | status | run | move" ;;
    *) err "unknown command $cmd" ;;
esac
