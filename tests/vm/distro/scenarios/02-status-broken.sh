#!/bin/sh
# summary: status tells a shield that holds (exit 0) from one broken on
#   purpose (exit 3, naming what broke): the irqbalance ban removed, the
#   partition made a member; on again repairs it; on says irqbalance
#   restarted only when its process changed
# distro: suites=bookworm
# skip-why: status reads the same files on both; run on Debian 12 only to keep CI under 40 minutes (it passed on Debian 13 too)
. /job/lib.sh "$1"
SH=2-3
D=/run/systemd/system/irqbalance.service.d
cs on $SH
check "on $SH exits 0" [ "$CS_RC" = 0 ]
cs status
check "status: holds, exit 0" [ "$CS_RC" = 0 ]
check "the ban is in systemd's manager environment (no unit file changed)" sh -c "systemctl show-environment | grep -qx 'IRQBALANCE_BANNED_CPULIST=2-3'"
check "no drop-in for irqbalance" [ ! -e $D/50-cpushield.conf ]
info "breaking it: the irqbalance ban removed, irqbalance restarted"
remove_irqbalance_ban
cs status
check "status: exit 3 when the irqbalance ban is gone" [ "$CS_RC" = 3 ]
check "status names irqbalance" grep -q "broken: .*irqbalance" "$OUT/cs.out"
cs on $SH
check "on again repairs it (exit 0)" [ "$CS_RC" = 0 ]
cs status
check "status: holds again" [ "$CS_RC" = 0 ]
info "breaking it: the partition made a member"
echo member >/sys/fs/cgroup/cpushield.slice/cpuset.cpus.partition
cs status
check "status: exit 3 when the partition is gone" [ "$CS_RC" = 3 ]
check "status names the partition" grep -q "broken: .*partition" "$OUT/cs.out"
check "status says the kernel no longer enforces it" grep -q "broken: the kernel lets tasks outside" "$OUT/cs.out"
cs on $SH
check "on again repairs it" [ "$CS_RC" = 0 ]
cs status
check "status: holds again" [ "$CS_RC" = 0 ]
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
cs status
check "status without a shield: exit 0" [ "$CS_RC" = 0 ]
info "a ban of the user's own in /etc/default/irqbalance: the ban goes through a drop-in and a restart"
cp /etc/default/irqbalance "$OUT/irqbalance.default"
echo "IRQBALANCE_BANNED_CPULIST=1" >>/etc/default/irqbalance
systemctl restart irqbalance; sleep 2
IRQB_BEFORE=$(irqbalance_pid)
cs on $SH
check "on $SH exits 0" [ "$CS_RC" = 0 ]
irqbalance_said_true "$OUT/cs.out" "$IRQB_BEFORE" "$(irqbalance_pid)"
check "the ban is a drop-in (the user's file sets a ban)" [ -e $D/50-cpushield.conf ]
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
cp "$OUT/irqbalance.default" /etc/default/irqbalance
systemctl restart irqbalance
result
