#!/bin/sh
# summary: evidence for where a SCHED_FIFO loop still running on the shield
#   goes when `off` runs (notes only): the loop's CPUs and the CPU it runs on,
#   each half second while off runs, off's own stack, the run queues of
#   sched_debug, and the kernel's stall reports at log level 7
# distro: suites=bookworm,trixie,trixie-rt default=no
. /job/lib.sh "$1"
TUNE=${CPUSHIELD_PROBE_TUNE---tune=all,rt-throttling}
dmesg -n 7
echo 1 >/proc/sys/kernel/sysrq 2>/dev/null
info "kernel $(uname -r) $(uname -v | grep -o PREEMPT_RT)"
cs on 2-3 $TUNE
/job/cpushield run --cpu 3 --fifo 80 -- sh -c 'while :; do :; done' >/dev/null 2>&1 &
sleep 2
LOOP=$(pgrep -f 'while :; do :; done' | head -n1)
info "loop pid $LOOP: $(grep Cpus_allowed_list /proc/$LOOP/status), on CPU $(awk '{ print $39 }' /proc/$LOOP/stat), $(chrt -p $LOOP | tr '\n' ' ')"
info "loop cgroup $(cat /proc/$LOOP/cgroup)"
info "throttling $(cat /proc/sys/kernel/sched_rt_runtime_us)"
/job/cpushield off --dry-run 2>&1 | head -n 12 | sed 's/^/    off-plan| /'
/job/cpushield off >"$OUT/off.out" 2>&1 &
OFF=$!
i=0
while [ $i -lt 24 ] && kill -0 $OFF 2>/dev/null; do
    sleep 0.5
    i=$((i + 1))
    info "t=${i}/2 s: loop $(grep Cpus_allowed_list /proc/$LOOP/status | tr -s '\t ' ' ') on CPU $(awk '{ print $39 }' /proc/$LOOP/stat) cgroup $(cut -d: -f3 /proc/$LOOP/cgroup); throttling $(cat /proc/sys/kernel/sched_rt_runtime_us)"
done
if kill -0 $OFF 2>/dev/null; then
    info "off (pid $OFF) still running after 12 s; its threads' stacks:"
    for t in /proc/$OFF/task/*; do echo "    --- $t $(cat $t/comm) wchan $(cat $t/wchan)"; sed 's/^/    | /' $t/stack; done
    for p in $(pgrep -f 'cpushield'); do echo "    --- pid $p $(tr '\0' ' ' </proc/$p/cmdline)"; sed 's/^/    | /' /proc/$p/stack; done
    grep -E '^cpu#|curr->pid|R +(sh|cpushield)' /proc/sched_debug 2>/dev/null | head -n 40 | sed 's/^/    sched_debug| /'
    [ -r /sys/kernel/debug/sched/debug ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
    grep -E '^cpu#|\.curr->pid|^ *R ' /sys/kernel/debug/sched/debug 2>/dev/null | head -n 40 | sed 's/^/    sched_debug| /'
    echo l >/proc/sysrq-trigger 2>/dev/null
    sleep 30
    info "after 42 s: off still running: $(kill -0 $OFF 2>/dev/null && echo yes || echo no)"
else
    info "off returned"
fi
sed 's/^/    off| /' "$OUT/off.out"
dmesg | grep -nE 'rcu|stall|blocked for more|NMI backtrace|CPU: [0-9]+ PID|RIP:|Call Trace' | head -n 60 | sed 's/^/  dmesg| /'
kill -9 $LOOP 2>/dev/null
result
