#!/bin/sh
# summary: systemd with cgroup v1 (systemd.unified_cgroup_hierarchy=0):
#   the v1 cpuset shield survives daemon-reload and new services; changed
#   in place to two named sets (run into each, one taken away by off --set);
#   off restores
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
# Named sets on v1: a cpuset each inside the shield's, with its memory
# nodes and balancing, the shield changed in place to hold them.
cs on 1-3 --set app1=1 --set app2=2-3
check "on 1-3 with two named sets, in place, exits 0" [ "$CS_RC" = 0 ]
V1=/sys/fs/cgroup/cpuset/cpushield
eff() { cat "$V1/$1/cpuset.effective_cpus" 2>/dev/null || cat "$V1/$1/cpuset.cpus"; }
check "app1's cpuset has CPU 1, app2's 2-3 ('$(eff app1)', '$(eff app2)')" [ "$(eff app1)/$(eff app2)" = 1/2-3 ]
set_sleepers
cs_of() { sed -n 's/^[0-9]*:cpuset://p' /proc/$1/cgroup; }
info "sleeper 1: pid $p1 on $(cpus_of $p1) in $(cs_of $p1); sleeper 2: pid $p2 on $(cpus_of $p2) in $(cs_of $p2)"
check "run --set app1: on CPU 1, in app1's cpuset" sh -c "[ '$(cpus_of $p1)' = 1 ] && [ '$(cs_of $p1)' = /cpushield/app1 ]"
check "run --cpu 3: on CPU 3, in app2's cpuset" sh -c "[ '$(cpus_of $p2)' = 3 ] && [ '$(cs_of $p2)' = /cpushield/app2 ]"
check "the kernel refuses app1's task a CPU of app2 (taskset -p -c 2)" sh -c "! taskset -p -c 2 $p1 >/dev/null 2>&1 && [ \"\$(awk '/^Cpus_allowed_list/ {print \$2}' /proc/$p1/status)\" = 1 ]"
cs status
check "status exits 0 with two sets" [ "$CS_RC" = 0 ]
cs on 1-3 --set app1=1-2 --set app2=3
check "change in place of the sets exits 0" [ "$CS_RC" = 0 ]
check "app1 now 1-2, app2 3 ('$(eff app1)', '$(eff app2)')" [ "$(eff app1)/$(eff app2)" = 1-2/3 ]
check "app2's task stayed, on CPU 3" sh -c "[ '$(cpus_of $p2)' = 3 ] && kill -0 $p2"
cs off --set app1
check "off --set app1 exits 0" [ "$CS_RC" = 0 ]
check "app1's cpuset is gone" [ ! -d "$V1/app1" ]
check "the shield is CPU 3 ('$(cat $V1/cpuset.cpus)')" [ "$(cat $V1/cpuset.cpus)" = 3 ]
c1=$(cpus_of $p1); left=no
kill -0 $p1 && [ "$(cs_of $p1)" != /cpushield ] && ! meets "$c1" 3 && left=yes
check "app1's task runs on off the shield (CPUs $c1, cpuset $(cs_of $p1))" [ $left = yes ]
cs status
check "status exits 0 with one set left" [ "$CS_RC" = 0 ]
kill $p1 $p2 2>/dev/null; wait 2>/dev/null
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
sleep 2
irqbalance_settle
snap after
snap_equal_after_irqbalance before after "after off: as before"
result
