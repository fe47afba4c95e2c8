#!/bin/sh
# summary: CPU hotplug (offline/online) and what it does to partitions, cpusets, tasks, IRQs (notes; run by hand)
# vm: cpus=4
# Run: tests/vm/run.sh --no-build --kernel 6.1 kernel-facts-hotplug   (and 6.12)
. /guest/lib.sh "$1"
CG=/sys/fs/cgroup
C=/sys/devices/system/cpu
aff() { awk '/^Cpus_allowed_list/ { print $2 }' /proc/$1/status; }
w() { ( echo "$2" >"$1" ) 2>&1 | sed 's/^.*: //' | head -n1 | grep . || echo ok; }
cgstate() { # cgstate DIR
    echo "cpus=$(cat $1/cpuset.cpus) eff=$(cat $1/cpuset.cpus.effective) part='$(cat $1/cpuset.cpus.partition)'"
}
for c in 0 1 2 3; do
    if [ -f $C/cpu$c/online ]; then
        note "cpu$c/online exists, mode $(stat -c %a $C/cpu$c/online), reads $(cat $C/cpu$c/online)"
    else
        note "cpu$c has no online file"
    fi
done
# A. tasks and IRQs wholly on the CPU that goes offline
taskset -c 3 sleep 10000 & T3=$!
taskset -c 2-3 sleep 10000 & T23=$!
sleep 0.3
n=$(irq_by_name 'virtio1-input'); m=$(irq_by_name 'virtio0-req.3')
[ -n "$n" ] && echo 3 >/proc/irq/$n/smp_affinity_list
i1=$(irq_by_name 'i8042'); [ -n "$i1" ] && echo 3 >/proc/irq/$i1/smp_affinity_list
note "before offline 3: task(3)=$(aff $T3) task(2-3)=$(aff $T23) irq $n(virtio1-input)=$(cat /proc/irq/$n/smp_affinity_list) irq $i1(i8042)=$(cat /proc/irq/$i1/smp_affinity_list) managed irq $m=$(cat /proc/irq/$m/smp_affinity_list 2>/dev/null) wq=$(cat /sys/devices/virtual/workqueue/cpumask) root.eff=$(cat $CG/cpuset.cpus.effective)"
t0=$(cut -d' ' -f1 /proc/uptime)
note "echo 0 > cpu3/online: $(w $C/cpu3/online 0); online=$(cat $C/online) cpu3/online=$(cat $C/cpu3/online)"
t1=$(cut -d' ' -f1 /proc/uptime)
note "while 3 offline: task(3)=$(aff $T3) task(2-3)=$(aff $T23) irq $n=$(cat /proc/irq/$n/smp_affinity_list) irq $i1=$(cat /proc/irq/$i1/smp_affinity_list) managed irq $m=$(cat /proc/irq/$m/smp_affinity_list 2>/dev/null) eff=$(cat /proc/irq/$m/effective_affinity_list 2>/dev/null) root.eff=$(cat $CG/cpuset.cpus.effective)"
note "echo 1 > cpu3/online: $(w $C/cpu3/online 1); online=$(cat $C/online)"
t2=$(cut -d' ' -f1 /proc/uptime)
note "after online 3: task(3)=$(aff $T3) task(2-3)=$(aff $T23) irq $n=$(cat /proc/irq/$n/smp_affinity_list) irq $i1=$(cat /proc/irq/$i1/smp_affinity_list) managed irq $m=$(cat /proc/irq/$m/smp_affinity_list 2>/dev/null) root.eff=$(cat $CG/cpuset.cpus.effective) (offline took $t0->$t1 s, online $t1->$t2 s)"
note "echo 1 > cpu3/online while online: $(w $C/cpu3/online 1); echo 0 > cpu0/online: $(w $C/cpu0/online 0)"
dmesg | grep -iE 'no longer affine|broke affinity|IRQ fixup|smpboot|CPU3' | tail -n 8 | while read -r l; do note "dmesg: $l"; done
kill $T3 $T23 2>/dev/null

# B. an isolated partition, then its CPUs go offline and online
echo +cpuset >$CG/cgroup.subtree_control; mkdir $CG/p
echo 2-3 >$CG/p/cpuset.cpus; echo isolated >$CG/p/cpuset.cpus.partition
sleep 100000 & S=$!; echo $S >$CG/p/cgroup.procs
note "partition 2-3: $(cgstate $CG/p) root.eff=$(cat $CG/cpuset.cpus.effective) task=$(aff $S)"
w $C/cpu3/online 0 >/dev/null
note "cpu3 offline: $(cgstate $CG/p) root.eff=$(cat $CG/cpuset.cpus.effective) task=$(aff $S)"
w $C/cpu3/online 1 >/dev/null
note "cpu3 online again: $(cgstate $CG/p) root.eff=$(cat $CG/cpuset.cpus.effective) task=$(aff $S)"
w $C/cpu2/online 0 >/dev/null; w $C/cpu3/online 0 >/dev/null
note "cpu2 and cpu3 offline: $(cgstate $CG/p) root.eff=$(cat $CG/cpuset.cpus.effective) task=$(aff $S)"
w $C/cpu2/online 1 >/dev/null; w $C/cpu3/online 1 >/dev/null
note "cpu2 and cpu3 online again: $(cgstate $CG/p) root.eff=$(cat $CG/cpuset.cpus.effective) task=$(aff $S) isolated=$(cat $CG/cpuset.cpus.isolated 2>/dev/null)"
echo $S >$CG/cgroup.procs; kill $S
echo member >$CG/p/cpuset.cpus.partition; rmdir $CG/p
note "after removing the partition: root.eff=$(cat $CG/cpuset.cpus.effective) online=$(cat $C/online)"
ok "probe ran"
result
