#!/bin/sh
# summary: raw systemd behaviour around a cpuset partition (notes only)
. /job/lib.sh "$1"
cg=/sys/fs/cgroup
systemctl --version | head -1
echo "root subtree_control: $(cat $cg/cgroup.subtree_control)"
echo "irqbalance: $(systemctl is-active irqbalance) tuned: $(systemctl is-active tuned) profile $(cat /etc/tuned/active_profile 2>/dev/null)"
systemctl cat irqbalance.service | grep -i environment
echo "--- transient slice via busctl"
busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager StartTransientUnit 'ssa(sv)a(sa(sv))' cpushield.slice fail 2 Description s "cpushield shield" AllowedCPUs ay 1 12 0
sleep 1
systemctl status cpushield.slice --no-pager | head -5
echo "root subtree_control: $(cat $cg/cgroup.subtree_control)"
ls $cg/cpushield.slice | tr '\n' ' '; echo
echo "slice cpus: $(cat $cg/cpushield.slice/cpuset.cpus) eff $(cat $cg/cpushield.slice/cpuset.cpus.effective)"
echo "system.slice cpus: '$(cat $cg/system.slice/cpuset.cpus)' eff $(cat $cg/system.slice/cpuset.cpus.effective)"
echo isolated >$cg/cpushield.slice/cpuset.cpus.partition; echo "partition: $(cat $cg/cpushield.slice/cpuset.cpus.partition)"
echo "system.slice eff after partition $(cat $cg/system.slice/cpuset.cpus.effective) init.scope $(cat $cg/init.scope/cpuset.cpus.effective)"
grep Cpus_allowed_list /proc/1/status
systemctl daemon-reload
echo "after daemon-reload: subtree $(cat $cg/cgroup.subtree_control) partition: $(cat $cg/cpushield.slice/cpuset.cpus.partition) sys eff $(cat $cg/system.slice/cpuset.cpus.effective)"
systemd-run --quiet --wait -p Type=oneshot taskset -c 2 true; echo "service taskset -c 2: rc $?"
echo "--- scope in the slice with PIDs via busctl"
sleep 600 & SP=$!
busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager StartTransientUnit 'ssa(sv)a(sa(sv))' cpushield-run-$SP.scope fail 2 Slice s cpushield.slice PIDs au 1 $SP 0
sleep 1; echo "scope pid cgroup: $(cat /proc/$SP/cgroup) cpus $(grep Cpus_allowed_list /proc/$SP/status)"
taskset -pc 3 $SP
systemctl daemon-reload; echo "after reload: $(grep Cpus_allowed_list /proc/$SP/status) partition $(cat $cg/cpushield.slice/cpuset.cpus.partition)"
echo "--- set-property on init.scope / system.slice"
systemctl set-property --runtime init.scope AllowedCPUs=0-1; echo "init.scope rc $? cpus '$(cat $cg/init.scope/cpuset.cpus)'"
systemctl set-property --runtime system.slice AllowedCPUs=0-1; echo "system.slice rc $? cpus '$(cat $cg/system.slice/cpuset.cpus)'"
ls /run/systemd/system.control/ 2>&1
systemctl revert init.scope system.slice; echo "revert rc $?"; ls -R /run/systemd/system.control/ 2>&1
echo "init.scope cpus after revert '$(cat $cg/init.scope/cpuset.cpus)' shown $(systemctl show -p AllowedCPUs init.scope)"
echo "--- move pid back to its original cgroup, stop slice"
echo $SP > $cg/system.slice/cpushield-job.service/cgroup.procs; echo "moved back rc $?"
sleep 1; systemctl list-units 'cpushield*' --no-pager --all | head
echo member > $cg/cpushield.slice/cpuset.cpus.partition
systemctl stop cpushield.slice; echo "stop rc $?"
sleep 1; echo "after stop: subtree $(cat $cg/cgroup.subtree_control) exists: $(ls -d $cg/cpushield.slice 2>&1)"
ls /run/systemd/transient/ 2>&1
kill $SP
echo "--- irqbalance drop-in"
mkdir -p /run/systemd/system/irqbalance.service.d
printf '[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=2-3\n' >/run/systemd/system/irqbalance.service.d/cpushield.conf
systemctl daemon-reload; systemctl try-restart irqbalance
sleep 1; tr '\0' '\n' </proc/$(systemctl show -p MainPID --value irqbalance)/environ | grep BANNED
cat /proc/irq/*/smp_affinity_list | sort | uniq -c
rm -r /run/systemd/system/irqbalance.service.d; systemctl daemon-reload; systemctl try-restart irqbalance
echo "env after: $(tr '\0' '\n' </proc/$(systemctl show -p MainPID --value irqbalance)/environ | grep BANNED)"
tuned-adm active
result
