#!/bin/sh
# summary: systemd with cgroup v1 (systemd.unified_cgroup_hierarchy=0):
#   the v1 cpuset shield survives daemon-reload and new services; off restores
# distro: cgroup=v1 suites=bookworm
# skip-why: Debian 13's kernel has no CONFIG_CPUSETS_V1 and systemd 257 refuses cgroup v1
. /job/lib.sh "$1"
SH=2-3
info "cgroup: $(stat -fc %T /sys/fs/cgroup) $(ls /sys/fs/cgroup | tr '\n' ' ')"
irqbalance_settle
snap before
cs on $SH
check "on $SH exits 0" [ "$CS_RC" = 0 ]
systemctl daemon-reload
systemctl restart systemd-journald irqbalance
systemd-run --quiet --unit=cs-new sleep 900
sleep 20
thread_leaks $SH >"$OUT/leaks"
sed 's/^/    /' "$OUT/leaks" | head
check "0 threads outside the shield allowed on $SH" [ ! -s "$OUT/leaks" ]
pid=$(systemctl show -p MainPID --value cs-new)
c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$pid/status)
check "a service started after on is off the shield ($c)" eval '! meets "$c" $SH'
check "a new service asking for CPU 2 by itself is refused" eval '! service_may_run_on 2'
cs status
check "status: holds" [ "$CS_RC" = 0 ]
systemctl stop cs-new
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
sleep 2
irqbalance_settle
snap after
snap_equal_after_irqbalance before after "after off: as before"
result
