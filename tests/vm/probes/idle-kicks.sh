#!/bin/sh
# summary: issue 58: the idle-balance kicks (SCHED softirqs, function-call
#   IPIs) an idle shielded CPU gets while the housekeeping CPUs are busy,
#   per way of making the shield: idle CPUs, CPUs kept busy by a pinned
#   spinner while the partition is made, CPU hotplug afterwards, and a
#   1 kHz SCHED_FIFO sleeper (notes, one KICKS line per case)
# vm: cpus=4
# Run: tests/vm/run.sh --binary STATIC_CPUSHIELD --kernel 6.12,6.1 --timeout 500 \
#        --append cpushield.kick_spin=0.01,0.05 idle-kicks
#      (--append 'cpushield.kick_spin=0.01,0.05' for other spin times;
#       VM_CGROUP=v1 ... --kernel 6.1 for the v1 sched_load_balance=0 form)
#
# Why (kernel/sched/fair.c): a CPU whose tick stops in idle joins
# nohz.idle_cpus_mask (nohz_balance_enter_idle) only while it has a sched
# domain, and leaves it only on its next busy tick (sched_balance_trigger /
# trigger_load_balance -> nohz_balancer_kick -> nohz_balance_exit_idle),
# which returns early on a NULL domain. A CPU already in the mask when its
# domain goes (isolated partition, sched_load_balance=0) stays in it, and
# the busy CPUs keep picking it as the idle load balancer (find_new_ilb ->
# kick_ilb: a function-call IPI, then SCHED_SOFTIRQ on it).
. /guest/lib.sh "$1"
SECS=${KICK_SECS:-6}
SPINS=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^cpushield.kick_spin=//p' | tail -n1 | tr ',' ' ')
SPINS=${SPINS:-0.05}
has_cpushield || { bad "cpushield binary in the guest"; result; }
C=/sys/devices/system/cpu
TR=/sys/kernel/tracing; [ -d $TR/events ] || TR=/sys/kernel/debug/tracing

# counters CPU: "SCHED CAL LOC RES" of that CPU
counters() {
    col=$(( $1 + 2 ))
    s=$(awk -v c=$col '$1 == "SCHED:" { print $c + 0 }' /proc/softirqs)
    awk -v c=$col -v s="$s" '$1 == "CAL:" { cal = $c } $1 == "LOC:" { loc = $c } $1 == "RES:" { res = $c }
        END { print s + 0, cal + 0, loc + 0, res + 0 }' /proc/interrupts
}
# measure NAME: per-second SCHED softirqs, CAL, LOC, RES on CPUs 3 and 2
# over SECS; with the ipi_send_cpu tracepoint (6.6+), who kicked CPU 3
measure() {
    name=$1
    trace=0
    if [ -w $TR/events/ipi/ipi_send_cpu/enable ]; then
        trace=1; echo > $TR/trace
        echo 'cpu == 3' > $TR/events/ipi/ipi_send_cpu/filter
        echo 1 > $TR/events/ipi/ipi_send_cpu/enable
    fi
    a3=$(counters 3); a2=$(counters 2)
    sleep "$SECS"
    b3=$(counters 3); b2=$(counters 2)
    r3=$(echo "$a3 $b3" | awk -v s=$SECS '{ printf "%6.1f %6.1f %6.1f %6.1f", ($5-$1)/s, ($6-$2)/s, ($7-$3)/s, ($8-$4)/s }')
    r2=$(echo "$a2 $b2" | awk -v s=$SECS '{ printf "%6.1f %6.1f %6.1f %6.1f", ($5-$1)/s, ($6-$2)/s, ($7-$3)/s, ($8-$4)/s }')
    set -- $r3 $r2
    note "KICKS $(uname -r) | $name | cpu3 SCHED/s $1 CAL/s $2 LOC/s $3 RES/s $4 | cpu2 SCHED/s $5 CAL/s $6 LOC/s $7 RES/s $8"
    if [ $trace = 1 ]; then
        echo 0 > $TR/events/ipi/ipi_send_cpu/enable
        echo 0 > $TR/events/ipi/ipi_send_cpu/filter
        sed -n 's/^ *\(.*\)-[0-9]* *\[\([0-9]*\)\].*callsite=\([^ ]*\) callback=\([^ ]*\).*/from cpu\2: \3 -> \4/p' $TR/trace |
            sed 's/+0x[0-9a-f\/]*//g' | sort | uniq -c | sort -rn | head -n 3 |
            while read -r n rest; do note "KICKS   $name: $n x $rest (in $SECS s)"; done
    fi
}
spin_on() { taskset -c "$1" sh -c 'while :; do :; done' & }
CG=/sys/fs/cgroup
part() { cat $CG/cpushield*/cpuset.cpus.partition $CG/*/cpushield*/cpuset.cpus.partition $CG/kick/cpuset.cpus.partition 2>/dev/null | head -n1; }
shield_dir() { for d in $CG/kick $CG/cpushield* $CG/*/cpushield*; do [ -f "$d/cpuset.cpus.partition" ] && { echo "$d"; return; }; done; }
# spin_in DIR CPU: a spinner on CPU inside the cgroup DIR (which has CPU)
spin_in() {
    taskset -c 0 sh -c 'while :; do :; done' &
    echo $! >"$1/cgroup.procs"; taskset -p -c "$2" $! >/dev/null
}
# reveal NAME: find_new_ilb picks the first *idle* CPU of the mask, so a
# stuck CPU 3 hides behind a stuck CPU 2: keep one busy (inside the
# shield, where its tick cannot change the mask: NULL domain) and count
# the kicks on the other
reveal() {
    d=$(shield_dir); [ -n "$d" ] || return 0
    for busy in 2 3; do
        other=$((5 - busy))
        spin_in "$d" $busy; R=$!
        sleep 0.5
        a=$(counters $other); sleep "$RSECS"; b=$(counters $other)
        kill $R; wait $R 2>/dev/null
        echo "$a $b" | awk -v s=$RSECS -v n="$1" -v o=$other -v b=$busy -v k="$(uname -r)" \
            '{ printf "CPUSHIELD-NOTE: [%s] KICKS %s | %s | reveal: cpu%d busy, cpu%d SCHED/s %.1f CAL/s %.1f\n", k, k, n, b, o, ($5-$1)/s, ($6-$2)/s }'
    done
    sleep 0.5
}
# by hand, the partition as cpushield's v2 form makes it (the kernel
# alone, no cpushield): SPIN >0 keeps a spinner on each of 2 and 3 inside
# the new cgroup while the partition is written, so the kernel does not
# move it off (it moves the root's tasks before it rebuilds the domains)
hand_on() {
    spin=$1
    grep -qw cpuset $CG/cgroup.subtree_control || echo +cpuset >$CG/cgroup.subtree_control
    mkdir -p $CG/kick; echo 2-3 >$CG/kick/cpuset.cpus
    S=""
    if [ "$spin" != 0 ]; then
        spin_in $CG/kick 2; S="$S $!"; spin_in $CG/kick 3; S="$S $!"
        sleep "$spin"
    fi
    echo isolated >$CG/kick/cpuset.cpus.partition
    [ -n "$S" ] && { kill $S; wait $S 2>/dev/null; }
    info "hand partition: '$(cat $CG/kick/cpuset.cpus.partition)' root effective $(cat $CG/cpuset.cpus.effective)"
}
hand_off() { echo member >$CG/kick/cpuset.cpus.partition; rmdir $CG/kick; }
hotplug() { # hotplug CPU...: each offline then online
    o=""
    for c in "$@"; do
        o="$o cpu$c:$( (echo 0 >$C/cpu$c/online) 2>&1 || echo off-failed)"; sleep 0.5
        o="$o$( (echo 1 >$C/cpu$c/online) 2>&1 || echo on-failed)"; sleep 0.5
    done
    note "KICKS hotplug$o; online=$(cat $C/online) partition '$(part)'"
}
RSECS=${KICK_RSECS:-4}

info "kernel $(uname -r), cmdline: $(cat /proc/cmdline)"
info "spin times: $SPINS s; each measure $SECS s, each reveal $RSECS s"
# This shell and what it starts stay on 0-1: with 0-1 busy the scheduler
# would otherwise run it on 2-3, whose busy ticks change the mask.
taskset -p -c 0-1 $$ >/dev/null
SUBTREE=$(cat $CG/cgroup.subtree_control)
# Housekeeping CPUs 0-1 busy throughout, as under any load.
spin_on 0; H0=$!; spin_on 1; H1=$!
sleep 2

measure "no shield, 2-3 idle"

# (a) the shield made while CPUs 2-3 are idle (the normal case)
sleep 1
cs on 2-3; check "a: on 2-3 exits 0" [ "$CS_RC" -eq 0 ]
info "partition: $(part)"
sleep 1
measure "a: on 2-3 while 2-3 idle"; reveal "a"

# (c) then CPUs 3 and 2 offline and online again, the shield still up
hotplug 3 2
measure "c: a, then cpu3, cpu2 offline+online"; reveal "c"

# (d) a 1 kHz SCHED_FIFO sleeper on CPU 2 (cyclictest), CPU 3 idle
cyc() {
    command -v cyclictest >/dev/null 2>&1 || { info "no cyclictest: $1 skipped"; return 0; }
    cpushield run --cpu 2 --fifo 80 -- cyclictest -m -t1 -i1000 -a2 -p80 -D $((SECS + 2)) -q >/tmp/cyc 2>&1 &
    CYC=$!
    sleep 1
    measure "$1, cyclictest 1 kHz FIFO 80 on cpu2"
    wait $CYC 2>/dev/null
    info "cyclictest: $(tail -n 3 /tmp/cyc | tr -s ' ' | tr '\n' ' ')"
}
cyc "d: c (hotplugged)"
cs off; check "a/c: off exits 0" [ "$CS_RC" -eq 0 ]
sleep 2
cs on 2-3; check "d: on 2-3 exits 0" [ "$CS_RC" -eq 0 ]
sleep 1
cyc "d: on 2-3 while 2-3 idle"
cs off

# (b) spinners pinned on 2 and 3 (root cgroup) started SPIN s before 'on',
# killed after it returns
for spin in $SPINS; do
    sleep 2
    spin_on 2; S2=$!; spin_on 3; S3=$!
    sleep "$spin"
    cs on 2-3; rc=$CS_RC
    kill $S2 $S3; wait $S2 $S3 2>/dev/null
    check "b: on 2-3 (spinners $spin s before) exits 0" [ "$rc" -eq 0 ]
    sleep 1
    measure "b: on 2-3 with 2-3 spinning (root cgroup) since $spin s before"; reveal "b $spin"
    cs off
done

# (e) the partition by hand: idle CPUs, then spinners inside the new cgroup
sleep 2
hand_on 0; sleep 1
measure "e: hand partition, 2-3 idle"; reveal "e 0"
hand_off
for spin in $SPINS; do
    sleep 2
    hand_on "$spin"; sleep 1
    measure "e: hand partition, spinners inside it since $spin s before"; reveal "e $spin"
    hand_off
done
check "off after the cases" [ "$CS_RC" -eq 0 ]
case " $SUBTREE " in *" cpuset "*) ;; *) echo -cpuset >$CG/cgroup.subtree_control ;; esac
kill $H0 $H1; wait $H0 $H1 2>/dev/null
result
