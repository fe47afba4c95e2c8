#!/bin/sh
# summary: issue 58: with housekeeping CPUs 0-1 busy, an idle shielded CPU and one running a 1 kHz SCHED_FIFO sleeper get at most 1 SCHED softirq and 1 function-call IPI a second: for the shield made by on while its CPUs were idle, after a change in place that adds a CPU, and after a shielded CPU went offline and back; audit judges it (interrupts.idle-balance); a partition made by hand while idle, the order that leaves the kicks, is the control
# vm: cpus=4 kernels=6.12,7
. /guest/lib.sh "$1"
SECS=${KICK_SECS:-3}
has_cpushield || { bad "cpushield binary in the guest"; result; }
C=/sys/devices/system/cpu
[ -w $C/cpu2/online ] && [ -w $C/cpu3/online ] || skip "CPUs 2-3 cannot go offline here"
CG=/sys/fs/cgroup
V1=""; [ -f $CG/cgroup.controllers ] || V1=$CG/cpuset
# counters CPU: "SCHED CAL" of that CPU
counters() {
    col=$(( $1 + 2 ))
    s=$(awk -v c=$col '$1 == "SCHED:" { print $c + 0 }' /proc/softirqs)
    awk -v c=$col -v s="$s" '$1 == "CAL:" { print s + 0, $c + 0 }' /proc/interrupts
}
# rate CPU: "SCHED/s CAL/s" of CPU over SECS
rate() {
    a=$(counters "$1"); sleep "$SECS"; b=$(counters "$1")
    echo "$a $b" | awk -v s="$SECS" '{ printf "%.1f %.1f", ($3-$1)/s, ($4-$2)/s }'
}
spin_on() { taskset -c "$1" sh -c 'while :; do :; done' & }
shield_dir() {
    [ -n "$V1" ] && { echo "$V1/cpushield"; return; }
    for d in $CG/kick $CG/cpushield*; do [ -f "$d/cpuset.cpus.partition" ] && { echo "$d"; return; }; done
}
# quiet CASE CPU [BUSY]: CPU gets at most 1 SCHED softirq and 1 CAL a
# second. find_new_ilb kicks only the first idle CPU of the mask, so a
# stuck CPU hides behind another: BUSY (the other shielded CPU) runs a
# spinner inside the shield meanwhile, where its tick cannot change the
# mask (no sched domain).
quiet() {
    name=$1 cpu=$2 busy=${3:-}
    R=""
    if [ -n "$busy" ]; then
        taskset -c 0 sh -c 'while :; do :; done' & R=$!
        echo $R >"$(shield_dir)/cgroup.procs"; taskset -p -c "$busy" $R >/dev/null
        sleep 0.5
    fi
    set -- $(rate "$cpu")
    [ -n "$R" ] && { kill $R; wait $R 2>/dev/null; }
    note "KICKS $(uname -r) | $name | cpu$cpu SCHED/s $1 CAL/s $2"
    LAST_SCHED=$1
    check "$name: CPU $cpu gets at most 1 SCHED softirq/s ($1) and 1 function-call IPI/s ($2)" \
        awk -v s="$1" -v c="$2" 'BEGIN { exit !(s <= 1 && c <= 1) }'
}
taskset -p -c 0-1 $$ >/dev/null
SUBTREE=$(cat $CG/cgroup.subtree_control)
spin_on 0; H0=$!; spin_on 1; H1=$!
sleep 2

# 1. The shield made while CPUs 2-3 are idle (the normal case).
cs on 2-3; check "on 2-3 exits 0" [ "$CS_RC" -eq 0 ]
check "on says it took CPUs 2-3 offline and back" grep -q "CPUs 2-3 are taken offline and online again" "$OUT/cs.out"
check "CPUs 0-3 are online after on" [ "$(cat $C/online)" = 0-3 ]
if [ -n "$V1" ]; then
    check "v1: the shield cpuset still has CPUs 2-3 after their hotplug" [ "$(cat "$(shield_dir)/cpuset.cpus")" = 2-3 ]
else
    check "the partition is isolated" [ "$(cat "$(shield_dir)/cpuset.cpus.partition")" = isolated ]
fi
sleep 1
quiet "on 2-3 made idle, both idle" 3
quiet "on 2-3 made idle, CPU 2 busy in the shield" 3 2
quiet "on 2-3 made idle, CPU 3 busy in the shield" 2 3
cpushield audit --window 3 --json >"$OUT/audit.json" 2>"$OUT/audit.err"
check "audit judges the kicks: interrupts.idle-balance ok" \
    sh -c "tr -d '\n ' <'$OUT/audit.json' | grep -q '\"id\":\"interrupts.idle-balance\",\"severity\":\"ok\"'"
cpushield metrics >"$OUT/metrics.txt" 2>&1
check "metrics export each shielded CPU's SCHED softirqs as a counter" grep -q '^cpushield_sched_softirqs_total{cpu="3"} [0-9]' "$OUT/metrics.txt"
check "metrics export each shielded CPU's function-call IPIs" grep -q '^cpushield_function_call_ipis_total{cpu="2"} [0-9]' "$OUT/metrics.txt"
cpushield status --json >"$OUT/status.json" 2>&1
check "status --json carries the kick rates it sampled" sh -c "tr -d '\n ' <'$OUT/status.json' | grep -q '\"kicks\":\[{\"calls_per_s\":[0-9.e-]*,\"cpu\":2,'"
# 2. A 1 kHz SCHED_FIFO sleeper on CPU 2, CPU 3 idle.
if command -v cyclictest >/dev/null 2>&1; then
    cpushield run --cpu 2 --fifo 80 -- cyclictest -m -t1 -i1000 -a2 -p80 -D $((SECS + 3)) -q >"$OUT/cyc" 2>&1 &
    CYC=$!; sleep 1
    quiet "1 kHz FIFO sleeper on CPU 2" 2
    wait $CYC 2>/dev/null
else
    info "no cyclictest in this guest: the sleeper case is left out"
fi
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]

# 3. A change in place that adds CPU 3.
sleep 1
cs on 2; check "on 2 exits 0" [ "$CS_RC" -eq 0 ]
cs on 2-3; check "on 2-3 (in place) exits 0" [ "$CS_RC" -eq 0 ]
sleep 1
quiet "on 2, then 2-3 in place, CPU 2 busy in the shield" 3 2

# 4. A shielded CPU offline and back behind the shield's back.
echo 0 >$C/cpu3/online; sleep 0.5; echo 1 >$C/cpu3/online; sleep 1
quiet "CPU 3 offline and back under the shield" 3 2
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]

# 5. The control: a partition made by hand while 2-3 idle, no hotplug
# after (the order cpushield used to make it in). Mostly kicked; when it
# is, audit must say so.
if [ -n "$V1" ]; then
    info "v1: no hand-made control here (the v2 partition is the control)"
    kill $H0 $H1; wait $H0 $H1 2>/dev/null
    result
fi
sleep 2
grep -qw cpuset $CG/cgroup.subtree_control || echo +cpuset >$CG/cgroup.subtree_control
mkdir -p $CG/kick; echo 2-3 >$CG/kick/cpuset.cpus; echo isolated >$CG/kick/cpuset.cpus.partition
sleep 1
set -- $(rate 3); s3=$1
taskset -c 0 sh -c 'while :; do :; done' & R=$!
echo $R >$CG/kick/cgroup.procs; taskset -p -c 3 $R >/dev/null; sleep 0.5
set -- $(rate 2); s2=$1
kill $R; wait $R 2>/dev/null
note "KICKS $(uname -r) | control: hand partition while idle, no hotplug | cpu3 SCHED/s $s3, cpu2 SCHED/s $s2"
if awk -v a="$s3" -v b="$s2" 'BEGIN { exit !(a > 5 || b > 5) }'; then
    cpushield audit --cpus 2-3 --window 3 --json >"$OUT/audit-control.json" 2>/dev/null
    check "control kicked: audit names interrupts.idle-balance as a warning" \
        sh -c "tr -d '\n ' <'$OUT/audit-control.json' | grep -q '\"id\":\"interrupts.idle-balance\",\"severity\":\"warn\"'"
else
    info "control: this run's hand partition was not kicked (the kernel's mask held neither CPU)"
fi
echo member >$CG/kick/cpuset.cpus.partition; rmdir $CG/kick
case " $SUBTREE " in *" cpuset "*) ;; *) echo -cpuset >$CG/cgroup.subtree_control ;; esac
kill $H0 $H1; wait $H0 $H1 2>/dev/null
result
