#!/bin/sh
# summary: raw kernel behaviour a shield tool must handle (records notes; run by hand)
# vm: cpus=4
# Run: tests/vm/run.sh --no-build kernel-facts            (cgroup v2, both kernels)
#      tests/vm/run.sh --no-build kernel-facts-v1         (cgroup v1, 6.1)
# Every finding is printed as a CPUSHIELD-NOTE line and collected by run.sh.
. /guest/lib.sh "$1"
CG=/sys/fs/cgroup
aff() { awk '/^Cpus_allowed_list/ { print $2 }' /proc/$1/status; }
try() { # try WHAT CMD...: note exit status and error text
    local e what=$1
    shift
    e=$("$@" 2>&1 >/dev/null); rc=$?
    note "$what: exit $rc${e:+ ($(echo "$e" | head -n1 | sed 's/^.*: //'))}"
}
w() { # w FILE VALUE: write, print "ok" or the error
    ( echo "$2" >"$1" ) 2>&1 | sed 's/^.*: //' | head -n1 | grep . || echo ok
}

if [ "$(cgroup_mode)" = v2 ]; then
    wq0=$(cat /sys/devices/virtual/workqueue/cpumask)
    # A. does the kernel give tasks back their own affinity when a partition goes?
    taskset -c 1-2 sleep 10000 & A12=$!
    taskset -c 3 sleep 10000 & A3=$!
    cyclictest -q -t2 -a 1,2 -i 50000 -D 10000 >/dev/null 2>&1 & ACT=$!
    sleep 0.5
    echo +cpuset >$CG/cgroup.subtree_control; mkdir $CG/p
    echo 2-3 >$CG/p/cpuset.cpus; echo isolated >$CG/p/cpuset.cpus.partition
    before="1-2:$(aff $A12) 3:$(aff $A3) threads(1,2):$(cat /proc/$ACT/task/*/status | awk '/^Cpus_allowed_list/ { printf "%s/", $2 }')"
    # B. the workqueue mask written while the partition exists, as a tool's undo would
    wqp=$(cat /sys/devices/virtual/workqueue/cpumask)
    echo 3 >/sys/devices/virtual/workqueue/cpumask; echo "$wq0" >/sys/devices/virtual/workqueue/cpumask
    wqw=$(cat /sys/devices/virtual/workqueue/cpumask)
    echo member >$CG/p/cpuset.cpus.partition; rmdir $CG/p; echo -cpuset >$CG/cgroup.subtree_control
    sleep 0.2
    note "A: tasks with own affinities (1-2, 3, threads pinned 1 and 2) under an isolated partition 2-3: $before; after the partition is removed: 1-2:$(aff $A12) 3:$(aff $A3) threads:$(cat /proc/$ACT/task/*/status | awk '/^Cpus_allowed_list/ { printf "%s/", $2 }')"
    note "B: workqueue cpumask '$wq0', with partition '$wqp'; wrote 3 then '$wq0' while partitioned: reads '$wqw'; after the partition is removed: '$(cat /sys/devices/virtual/workqueue/cpumask)'"
    kill $A12 $A3 $ACT; wait $A12 $A3 $ACT 2>/dev/null
    echo "$wq0" >/sys/devices/virtual/workqueue/cpumask
    taskset -c 1-2 sleep 10000 & P12=$!
    taskset -c 3 sleep 10000 & P3=$!
    sleep 10000 & PALL=$!
    sleep 0.2
    echo +cpuset >$CG/cgroup.subtree_control
    mkdir $CG/shield
    echo 2-3 >$CG/shield/cpuset.cpus
    note "v2 files of a child cpuset: $(cd $CG/shield && ls -d cpuset.* | tr '\n' ' ')"
    note "v2 root files: $(cd $CG && ls -d cpuset.* | tr '\n' ' ')"
    r=$(w $CG/shield/cpuset.cpus.partition isolated)
    note "v2: write 'isolated' to cpuset.cpus.partition: $r; reads '$(cat $CG/shield/cpuset.cpus.partition)'; root cpuset.cpus.effective '$(cat $CG/cpuset.cpus.effective)'"
    [ -f $CG/cpuset.cpus.isolated ] && note "v2: root cpuset.cpus.isolated reads '$(cat $CG/cpuset.cpus.isolated)'"
    note "v2: /sys/devices/system/cpu/isolated with a partition reads '$(cat /sys/devices/system/cpu/isolated)'"
    note "v2: workqueue cpumask before '$wq0', with the partition '$(cat /sys/devices/virtual/workqueue/cpumask)'"
    note "v2: after the partition: a task that had 1-2 has '$(aff $P12)', one that had 3 has '$(aff $P3)', one that had all has '$(aff $PALL)'"
    # writing the original workqueue mask back while the partition exists
    r=$(w /sys/devices/virtual/workqueue/cpumask "$wq0")
    note "v2: writing workqueue cpumask '$wq0' while the partition exists: $r; reads '$(cat /sys/devices/virtual/workqueue/cpumask)'"
    r=$(w /sys/devices/virtual/workqueue/cpumask 3)
    note "v2: writing workqueue cpumask '3' while the partition exists: $r; reads '$(cat /sys/devices/virtual/workqueue/cpumask)'"
    # sched_setaffinity from outside towards the partition
    try "v2: taskset -c 3 CMD outside the partition" taskset -c 3 true
    try "v2: taskset -p -c 2-3 on a running task outside" taskset -p -c 2-3 $PALL
    note "v2: ... its affinity afterwards '$(aff $PALL)'"
    try "v2: taskset -p -c 1-3 on a running task outside" taskset -p -c 1-3 $PALL
    note "v2: ... its affinity afterwards '$(aff $PALL)'"
    # a task moved into the partition
    echo $PALL >$CG/shield/cgroup.procs
    note "v2: a task moved into the partition has '$(aff $PALL)'"
    try "v2: taskset -p -c 0 on a task inside the partition" taskset -p -c 0 $PALL
    echo $PALL >$CG/cgroup.procs
    note "v2: moved back to the root it has '$(aff $PALL)'"
    # kernel threads and cgroup moves
    mkdir $CG/hk; echo 0-1 >$CG/hk/cpuset.cpus 2>/dev/null
    moved=0; refused=0; err=""
    for t in $(tasks_table | awk '$3 == 2 { print $1 }'); do
        if e=$( (echo $t >$CG/hk/cgroup.procs) 2>&1); then moved=$((moved + 1)); else refused=$((refused + 1)); err=$(echo "$e" | sed 's/^.*: //'); fi
    done
    note "v2: moving kernel threads into a sibling cgroup: $moved moved, $refused refused ($err)"
    for t in $(cat $CG/hk/cgroup.procs); do echo $t >$CG/cgroup.procs; done
    rmdir $CG/hk
    # kthread affinity
    for pat in '^kworker/R-' '^ksoftirqd/2' '^kworker/u' '^rcu_preempt' '^kthreadd' '^irq/'; do
        t=$(tasks_table | awk -v p="$pat" '$5 ~ p { print $1; exit }')
        [ -n "$t" ] || continue
        n=$(tasks_table | awk -v t=$t '$1 == t { print $5 }')
        try "v2: taskset -p -c 0-1 on kthread $n (cpus $(aff $t))" taskset -p -c 0-1 $t
        note "v2: ... $n now has '$(aff $t)'"
    done
    # a sibling overlapping the partition: the write succeeds, the partition turns invalid
    mkdir $CG/sib
    r=$(w $CG/sib/cpuset.cpus 1-2)
    note "v2: sibling writes cpuset.cpus 1-2 overlapping the partition: $r; partition reads '$(cat $CG/shield/cpuset.cpus.partition)'"
    echo "" >$CG/sib/cpuset.cpus 2>/dev/null; rmdir $CG/sib
    note "v2: sibling removed: partition reads '$(cat $CG/shield/cpuset.cpus.partition)'"
    # change the partition in place: 2-3 -> 3
    r=$(w $CG/shield/cpuset.cpus 3)
    note "v2: partition cpuset.cpus 2-3 -> 3 in place: $r; reads '$(cat $CG/shield/cpuset.cpus.partition)' effective '$(cat $CG/shield/cpuset.cpus.effective)'; root effective '$(cat $CG/cpuset.cpus.effective)'"
    # remove
    r=$(w $CG/shield/cpuset.cpus.partition member)
    note "v2: partition back to member: $r; workqueue cpumask '$(cat /sys/devices/virtual/workqueue/cpumask)'"
    rmdir $CG/shield
    echo -cpuset >$CG/cgroup.subtree_control
    note "v2: partition removed: workqueue cpumask '$(cat /sys/devices/virtual/workqueue/cpumask)' (was '$wq0'); the tasks have 1-2:'$(aff $P12)' 3:'$(aff $P3)' all:'$(aff $PALL)'"
    kill $P12 $P3 $PALL
fi

if [ "$(cgroup_mode)" = v1 ]; then
    R=$CG/cpuset
    taskset -c 1-2 sleep 10000 & P12=$!
    sleep 10000 & PALL=$!
    mkdir $R/rt $R/nrt
    r=$(w $R/rt/cpuset.cpus 2-3); note "v1: rt cpuset.cpus 2-3: $r"
    r=$( (echo $PALL >$R/rt/tasks) 2>&1 | sed 's/^.*: //'); note "v1: a task into rt before mems is set: ${r:-ok}"
    cat $R/cpuset.mems >$R/rt/cpuset.mems; cat $R/cpuset.mems >$R/nrt/cpuset.mems
    echo 0-1 >$R/nrt/cpuset.cpus
    r=$(w $R/rt/cpuset.cpu_exclusive 1); note "v1: rt cpu_exclusive 1: $r"
    r=$(w $R/nrt/cpuset.cpus 1-2); note "v1: nrt cpuset.cpus 1-2 overlapping exclusive rt: $r"
    echo 0 >$R/cpuset.sched_load_balance; echo 0 >$R/rt/cpuset.sched_load_balance
    moved=0; refused=0; err=""
    for t in $(cat $R/tasks); do
        if e=$( (echo $t >$R/nrt/tasks) 2>&1); then moved=$((moved + 1)); else refused=$((refused + 1)); err="$err $(awk '/^Name/ { print $2 }' /proc/$t/status)"; fi
    done
    note "v1: moving every root task to nrt: $moved moved, $refused refused:$(echo $err | tr ' ' '\n' | sed 's/[0-9].*//' | sort | uniq -c | awk '{ printf " %s x%s", $2, $1 }')"
    note "v1: in nrt a task that had 1-2 has '$(aff $P12)', one that had all has '$(aff $PALL)'"
    try "v1: taskset -c 3 CMD from nrt" taskset -c 3 true
    try "v1: taskset -p -c 1-3 on a task in nrt" taskset -p -c 1-3 $PALL
    note "v1: ... its affinity afterwards '$(aff $PALL)'"
    note "v1: root cpuset.cpus '$(cat $R/cpuset.cpus)' effective '$(cat $R/cpuset.effective_cpus 2>/dev/null)'"
    r=$(grep -qx 2 $R/nrt/tasks && echo "kthreadd is in nrt" || echo "kthreadd stayed in root")
    e=$( (echo 2 >$R/tasks) 2>&1 | sed 's/^.*: //'); note "v1: $r; moving kthreadd (pid 2) back to the root: ${e:-ok}; it is now in '$(sed -n 's/^[0-9]*:cpuset://p' /proc/2/cgroup)'"
    for t in $(cat $R/nrt/tasks); do echo $t >$R/tasks 2>/dev/null; done
    rmdir $R/rt $R/nrt
    echo 1 >$R/cpuset.sched_load_balance
    note "v1: after undo a task that had 1-2 has '$(aff $P12)', all: '$(aff $PALL)'"
    kill $P12 $PALL
fi

# IRQs: which refuse, and with what error
for n in $(irq_list); do
    v=$(cat /proc/irq/$n/smp_affinity_list)
    r=$(w /proc/irq/$n/smp_affinity_list 0-1)
    [ "$r" = ok ] || note "irq $n ($(irq_name $n)) on $v refuses 0-1: $r"
done
n=$(irq_by_name 'virtio1-input')
if [ -n "$n" ]; then
    note "irq $n ($(irq_name $n)) after writing 0-1: smp_affinity_list '$(cat /proc/irq/$n/smp_affinity_list)' effective '$(cat /proc/irq/$n/effective_affinity_list)'"
fi
r=$(w /proc/irq/default_smp_affinity 3); note "default_smp_affinity '3': $r; reads '$(cat /proc/irq/default_smp_affinity)'"
r=$(w /proc/irq/default_smp_affinity f)

# the watchdog knob (TESTBED: reading it while off broke re-enabling)
if [ -f /proc/sys/kernel/watchdog ]; then
    a=$(cat /proc/sys/kernel/watchdog)
    # control: off then on without reading in between
    echo 0 >/proc/sys/kernel/watchdog; r=$(w /proc/sys/kernel/watchdog 1)
    note "watchdog control: was $a; wrote 0, then 1 without reading: $r, reads $(cat /proc/sys/kernel/watchdog)"
    echo 1 >/proc/sys/kernel/watchdog
    echo 0 >/proc/sys/kernel/watchdog; b=$(cat /proc/sys/kernel/watchdog); s=$(cat /proc/sys/kernel/soft_watchdog 2>/dev/null)
    r=$(w /proc/sys/kernel/watchdog 1); c=$(cat /proc/sys/kernel/watchdog)
    note "watchdog: was $a; wrote 0, read $b (soft_watchdog $s); wrote 1: $r, reads $c"
    r=$(w /proc/sys/kernel/nmi_watchdog 0); note "nmi_watchdog write 0: $r"
fi
ok "probe ran"
result
