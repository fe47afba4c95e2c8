#!/bin/sh
# summary: which cpuset partitions a kernel booted with isolcpus accepts (records notes; run by hand)
# vm: cpus=4
# Run: tests/vm/run.sh --no-build --append 'isolcpus=nohz,domain,managed_irq,2-3 nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1' kernel-facts-isolcpus
# Every finding is printed as a CPUSHIELD-NOTE line and collected by run.sh.
. /guest/lib.sh "$1"
CG=/sys/fs/cgroup
note "boot: isolated=$(cat /sys/devices/system/cpu/isolated) nohz_full=$(cat /sys/devices/system/cpu/nohz_full 2>/dev/null) root cpus.isolated=$(cat $CG/cpuset.cpus.isolated 2>/dev/null || echo n/a) wq=$(cat /sys/devices/virtual/workqueue/cpumask) default_smp_affinity=$(cat /proc/irq/default_smp_affinity)"
echo +cpuset >$CG/cgroup.subtree_control
# part CPUS TYPE: make a partition of CPUS of TYPE, note what reads back, remove it
part() {
    mkdir $CG/p
    echo "$1" >$CG/p/cpuset.cpus
    e=$( (echo "$2" >$CG/p/cpuset.cpus.partition) 2>&1 | sed 's/^.*: //')
    note "partition $2 over $1: write ${e:-ok}; reads '$(cat $CG/p/cpuset.cpus.partition)', effective $(cat $CG/p/cpuset.cpus.effective), root effective $(cat $CG/cpuset.cpus.effective), root isolated $(cat $CG/cpuset.cpus.isolated 2>/dev/null || echo n/a), wq $(cat /sys/devices/virtual/workqueue/cpumask)"
    echo member >$CG/p/cpuset.cpus.partition 2>/dev/null
    rmdir $CG/p
}
for t in isolated root; do
    part 2-3 $t      # all the boot-isolated CPUs
    part 3 $t        # some of them
    part 1-3 $t      # them and a housekeeping CPU
    part 1 $t        # housekeeping only
done
# A sibling holding the housekeeping CPUs while 2-3 is isolated (cgroup v1 style layout)
mkdir $CG/p $CG/q; echo 2-3 >$CG/p/cpuset.cpus; echo isolated >$CG/p/cpuset.cpus.partition
echo 0-1 >$CG/q/cpuset.cpus
note "isolated 2-3 with a member sibling 0-1: p '$(cat $CG/p/cpuset.cpus.partition)', q effective $(cat $CG/q/cpuset.cpus.effective)"
echo member >$CG/p/cpuset.cpus.partition; rmdir $CG/p $CG/q
# An ordinary task asking for a boot-isolated CPU: isolcpus=domain does not forbid it
taskset -c 3 sh -c 'grep Cpus_allowed_list /proc/self/status' >/tmp/o 2>&1
note "taskset -c 3 with no partition: $(cat /tmp/o | tr '\n' ' ')"
note "init's CPUs: $(awk '/^Cpus_allowed_list/ {print $2}' /proc/1/status); kthreadd: $(awk '/^Cpus_allowed_list/ {print $2}' /proc/2/status)"
echo -cpuset >$CG/cgroup.subtree_control
check "facts noted" true
result
