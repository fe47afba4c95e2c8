#!/bin/sh
# summary: the .deb installs and changes nothing; a config and the enabled
#   cpushield.service shield CPUs 2-3 at boot (a second boot of the same
#   disk), before multi-user.target, with the services started at boot off
#   them; verify, metrics and man work; a removed irqbalance ban fails
#   verify; systemctl stop cpushield gives back the machine; purge
# distro: reboot=yes suites=trixie
# skip-why: the same package and unit on both; Debian 13 only in CI to keep it under 40 minutes (it passed on Debian 12 in session 7)
. /job/lib.sh "$1"
SH=2-3
us() { systemctl show -p "$2" --value "$1"; }   # a unit's monotonic timestamp, µs
if [ "$PHASE" = 1 ]; then
    [ -f /job/cpushield.deb ] || { check "the job has the .deb (tests/vm/ci.sh builds it)" false; result; }
    irqbalance_settle
    snap before
    dpkg -i /job/cpushield.deb >"$OUT/dpkg-i.out" 2>&1; rc=$?
    sed 's/^/    | /' "$OUT/dpkg-i.out"
    check "dpkg -i exits 0" [ "$rc" = 0 ]
    check "the unit is installed, disabled" [ "$(systemctl is-enabled cpushield.service 2>&1)" = disabled ]
    snap installed
    snap_equal before installed "installing the package changed nothing on the running system"
    check "man cpushield shows the page, with its commands and exit status" eval 'man -P cat cpushield 2>/dev/null | grep -q "cpushield-apply(8)" && man -P cat cpushield 2>/dev/null | grep -q "Exit status"'
    check "man cpushield-apply shows the page" eval 'man -P cat cpushield-apply 2>/dev/null | grep -q -- "--config"'
    check "bash completion installed" [ -s /usr/share/bash-completion/completions/cpushield ]
    mkdir -p /etc/cpushield
    cp /usr/share/doc/cpushield/examples/cpushield.toml /etc/cpushield/cpushield.toml
    echo 'cpus = "2-3"' >>/etc/cpushield/cpushield.toml
    cs verify
    check "verify before the shield: exit 7 (differs: no shield)" [ "$CS_RC" = 7 ]
    systemctl enable cpushield.service >/dev/null 2>&1
    # the second boot's progress and cpushield's output on the console
    mkdir -p /etc/systemd/system.conf.d /etc/systemd/system/cpushield.service.d
    printf '[Manager]\nShowStatus=yes\n' >/etc/systemd/system.conf.d/cs-test.conf
    printf '[Service]\nStandardOutput=journal+console\nStandardError=journal+console\n' >/etc/systemd/system/cpushield.service.d/cs-test.conf
    check "systemctl enable cpushield" [ "$(systemctl is-enabled cpushield.service)" = enabled ]
    reboot_and_resume
fi

info "second boot: $(cut -d' ' -f1 /proc/uptime)s up"
check "cpushield.service is active" [ "$(systemctl is-active cpushield.service)" = active ]
applied=$(us cpushield.service ExecMainExitTimestampMonotonic)
multi=$(us multi-user.target ActiveEnterTimestampMonotonic)
started=$(us cpushield.service ExecMainStartTimestampMonotonic)
info "boot to shield applied: $(awk -v a="$applied" 'BEGIN { printf "%.1f", a / 1e6 }') s (apply took $(awk -v a="$applied" -v s="$started" 'BEGIN { printf "%.1f", (a - s) / 1e6 }') s); multi-user.target at $(awk -v m="$multi" 'BEGIN { printf "%.1f", m / 1e6 }') s"
note "boot to shield applied: $(awk -v a="$applied" 'BEGIN { printf "%.1f", a / 1e6 }') s, apply $(awk -v a="$applied" -v s="$started" 'BEGIN { printf "%.1f", (a - s) / 1e6 }') s, multi-user.target $(awk -v m="$multi" 'BEGIN { printf "%.1f", m / 1e6 }') s (TCG)"
check "the shield was in place before multi-user.target" [ "$applied" -gt 0 -a "$applied" -le "$multi" ]
journalctl -b -u cpushield.service --no-pager -o cat >"$OUT/unit.journal" 2>&1
sed 's/^/    | /' "$OUT/unit.journal" | head -n 30
irqbalance_settle
thread_leaks $SH >"$OUT/leaks"
sed 's/^/    /' "$OUT/leaks" | head -20
check "services started at boot: 0 threads outside the shield allowed on $SH" [ ! -s "$OUT/leaks" ]
for u in systemd-journald irqbalance dbus systemd-logind; do
    pid=$(us $u MainPID)
    [ -n "$pid" ] && [ "$pid" != 0 ] || continue
    c=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$pid/status)
    check "service $u started at boot (pid $pid) allowed $c: off $SH" eval '! meets "$c" $SH'
done
check "a new service asking for CPU 2 by itself is refused by the kernel" eval '! service_may_run_on 2'
cs verify
check "verify: exit 0" [ "$CS_RC" = 0 ]
mkdir -p /tmp/prom
cs metrics --textfile /tmp/prom
check "metrics --textfile exits 0" [ "$CS_RC" = 0 ]
sed 's/^/    | /' /tmp/prom/cpushield.prom | grep -v '# HELP' | head -n 30
check "the textfile parses: HELP/TYPE lines and 'name{labels} number' samples" awk '
    /^# HELP cpushield_[a-z_]+ / { next }
    /^# TYPE cpushield_[a-z_]+ (gauge|counter)$/ { typed[$3] = 1; next }
    { n = $1; sub(/\{.*/, "", n)
      if (!(n in typed) || $0 !~ /^cpushield_[a-z_]+(\{[a-z]+="[^"]*"\})? -?[0-9.e+]+$/) { print "bad: " $0; bad = 1 } }
    END { exit bad }' /tmp/prom/cpushield.prom
check "metrics: shield_up 1" grep -qx 'cpushield_shield_up 1' /tmp/prom/cpushield.prom
check "metrics: 0 leaked threads" grep -qx 'cpushield_leaked_threads 0' /tmp/prom/cpushield.prom

info "changing the config to CPUs 3 with a task running on CPU 3, and back"
/job/cpushield run --cpu 3 -- sleep 905 >"$OUT/run.out" 2>&1 &
sleep 3
RUNPID=$(pgrep -f "sleep 905" -n)
RUNCG=$(cat /proc/$RUNPID/cgroup)
P=/sys/fs/cgroup/cpushield.slice/cpuset.cpus.partition
# watch the partition and the root's CPUs while the shield changes
( while [ ! -f /tmp/stop-watch ]; do echo "$(cat $P 2>&1) | $(cat /sys/fs/cgroup/cpuset.cpus.effective)"; sleep 0.05; done ) >"$OUT/watch" 2>&1 &
sed -i 's/^cpus = .*/cpus = "3"/' /etc/cpushield/cpushield.toml
systemctl reload cpushield.service
cs verify
check "after reload with cpus = 3: verify exit 0" [ "$CS_RC" = 0 ]
check "the shield slice holds CPU 3" [ "$(cat /sys/fs/cgroup/cpushield.slice/cpuset.cpus)" = 3 ]
check "the task on CPU 3 stayed: same process, same cgroup" [ "$(cat /proc/$RUNPID/cgroup 2>/dev/null)" = "$RUNCG" ]
check "the task on CPU 3 is still allowed CPU 3 only" [ "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$RUNPID/status)" = 3 ]
check "a new service asking for CPU 2 by itself may run again" service_may_run_on 2
sed -i 's/^cpus = .*/cpus = "2-3"/' /etc/cpushield/cpushield.toml
systemctl reload cpushield.service
touch /tmp/stop-watch; sleep 0.3; rm -f /tmp/stop-watch
info "partition | root CPUs, as seen every 50 ms during both changes: $(sort "$OUT/watch" | uniq -c | tr '\n' ';')"
check "the partition read 'isolated' throughout both changes" eval '! grep -v "^isolated |" "$OUT/watch" | grep -q .'
check "CPU 3 stayed out of the root's CPUs throughout" eval '! sed "s/.*| //" "$OUT/watch" | grep -q 3'
info "IRQs allowed on $SH right after: $(irq_on $SH | tr '\n' ' ')"
cs verify
check "back to cpus = 2-3: verify exit 0" [ "$CS_RC" = 0 ]
sleep 12
info "IRQs allowed on $SH 12 s later (an irqbalance cycle): $(irq_on $SH | tr '\n' ' ')"
check "the task on CPU 3 stayed through both changes" [ "$(cat /proc/$RUNPID/cgroup 2>/dev/null)" = "$RUNCG" ]
kill "$RUNPID" 2>/dev/null

info "breaking it: the irqbalance ban removed, irqbalance restarted"
remove_irqbalance_ban
cs verify
check "verify: exit 3 when the irqbalance ban is gone" [ "$CS_RC" = 3 ]
check "verify names irqbalance" grep -q "broken (irqbalance)" "$OUT/cs.out"
systemctl reload cpushield.service
check "systemctl reload cpushield (apply) repairs it" [ "$(systemctl is-active cpushield.service)" = active ]
cs verify
check "verify: exit 0 again" [ "$CS_RC" = 0 ]

systemctl stop cpushield.service
check "systemctl stop cpushield: inactive" [ "$(systemctl is-active cpushield.service)" = inactive ]
irqbalance_settle
snap stopped
snap_equal_after_irqbalance before stopped "after systemctl stop: IRQs, cgroups, unit properties, irqbalance, runtime files as before the first boot's shield"
check "after stop: a new service may ask for CPU 2 again" service_may_run_on 2
systemctl start cpushield.service
check "systemctl start cpushield again: active" [ "$(systemctl is-active cpushield.service)" = active ]
systemctl stop cpushield.service
irqbalance_settle
snap stopped2
snap_equal_after_irqbalance stopped stopped2 "start and stop in one boot: everything as before, threads included"

info "an invalid config: the unit must fail visibly"
echo 'cpus = "2-9"' >/etc/cpushield/cpushield.toml
systemctl start cpushield.service 2>/dev/null
check "start with an invalid config: the unit failed" [ "$(systemctl is-active cpushield.service)" = failed ]
systemctl status cpushield.service --no-pager -l >"$OUT/failed.status" 2>&1
sed 's/^/    | /' "$OUT/failed.status" | head -n 14
check "systemctl status shows why (CPUs 4-9 do not exist)" grep -q "CPUs 4-9 do not exist" "$OUT/failed.status"
check "and nothing changed: a new service may ask for CPU 2" service_may_run_on 2
systemctl reset-failed cpushield.service
systemctl disable cpushield.service >/dev/null 2>&1
dpkg --purge cpushield >"$OUT/purge.out" 2>&1; rc=$?
sed 's/^/    | /' "$OUT/purge.out"
check "dpkg --purge exits 0" [ "$rc" = 0 ]
check "the binary is gone" [ ! -e /usr/sbin/cpushield ]
check "the admin's config is kept" [ -f /etc/cpushield/cpushield.toml ]
snap purged
snap_equal_after_irqbalance stopped2 purged "purging the package changed nothing on the running system"
result
