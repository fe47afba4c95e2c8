#!/bin/sh
# summary: someone else takes a shielded CPU offline: status says the shield no longer holds and names the CPU (exit 3); brought back online, status reads what the kernel made of the partition; off gives back exactly the snapshot before on; off while the CPU is still offline restores the rest, names the CPU and exits 5, and once it is online again a second off finishes exactly; with --heal on, the healer repairs what the kernel undid when the CPU comes back (status exit 0 within 3 s under emulation, no command run) and off stops it
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
ONLINE=/sys/devices/system/cpu/cpu3/online
has_cpushield || { bad "cpushield binary in the guest"; result; }
[ -w $ONLINE ] || skip "CPU 3 cannot go offline here ($ONLINE not writable)"
custom_state
snap before

# 1. Offline while shielded, back online, then off: no healer (part 3 has
# one), so what the kernel undid stays undone for status to see.
cs on $SH --heal off; check "on $SH --heal off exits 0" [ "$CS_RC" -eq 0 ]
echo 0 >$ONLINE; check "CPU 3 taken offline behind the shield's back" [ "$(cat $ONLINE)" = 0 ]
info "partition with CPU 3 offline: $(cat /sys/fs/cgroup/cpushield/cpuset.cpus.partition 2>/dev/null); effective $(cat /sys/fs/cgroup/cpushield/cpuset.cpus.effective 2>/dev/null)"
CS_SHOW=40 cs status; check "status with CPU 3 offline: exit 3 (the shield no longer holds)" [ "$CS_RC" -eq 3 ]
cpushield status --json >"$OUT/st-off.json" 2>/dev/null
check "status --json has the finding 'offline'" grep -q '"id": "offline"' "$OUT/st-off.json"
check "the finding names CPU 3" grep -q 'CPU 3 of the shield is offline' "$OUT/st-off.json"
echo 1 >$ONLINE; check "CPU 3 back online" [ "$(cat $ONLINE)" = 1 ]
info "partition with CPU 3 back: $(cat /sys/fs/cgroup/cpushield/cpuset.cpus.partition 2>/dev/null); effective $(cat /sys/fs/cgroup/cpushield/cpuset.cpus.effective 2>/dev/null)"
CS_SHOW=40 cs status
note "CPU 3 offline and back under an active shield: status exit $CS_RC, partition $(cat /sys/fs/cgroup/cpushield/cpuset.cpus.partition 2>/dev/null), effective $(cat /sys/fs/cgroup/cpushield/cpuset.cpus.effective 2>/dev/null)"
check "status once CPU 3 is back: exit 0 or 3, no error ($CS_RC)" [ "$CS_RC" -eq 0 -o "$CS_RC" -eq 3 ]
cs off; check "off exits 0" [ "$CS_RC" -eq 0 ]
snap after1
snap_equal before after1 "offline and back, then off: the snapshot equals the one before on"

# 2. Offline while shielded, off while it is still offline, then online.
cs on $SH --heal off; check "on $SH --heal off again exits 0" [ "$CS_RC" -eq 0 ]
echo 0 >$ONLINE; check "CPU 3 offline again" [ "$(cat $ONLINE)" = 0 ]
CS_SHOW=40 cs off
check "off with CPU 3 offline: exit 5 (partly restored)" [ "$CS_RC" -eq 5 ]
check "off names CPU 3 offline and how to finish" grep -q "CPUs 3 of the shield are offline.*cpu3/online.*'cpushield off' again" "$OUT/cs.out"
cs status; check "the journal is kept: status still sees the shield (exit 3)" [ "$CS_RC" -eq 3 ]
echo 1 >$ONLINE; check "CPU 3 online once more" [ "$(cat $ONLINE)" = 1 ]
cs off; check "off again, CPU 3 online: exit 0" [ "$CS_RC" -eq 0 ]
snap after2
snap_equal before after2 "off while CPU 3 was offline, then online and off again: the snapshot equals the one before on"
# 3. The healer: CPU 3 offline and back under a shield made with --heal on;
# the healer repairs what the kernel undid when it came back, without a
# command run by a person, and off stops it.
cs on $SH --heal on; check "on $SH --heal on exits 0" [ "$CS_RC" -eq 0 ]
HPID=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' /run/cpushield/heal.json)
check "the healer runs (pid $HPID, cpushield-heal)" grep -q cpushield-heal "/proc/$HPID/comm"
cs status; check "status with the healer: exit 0" [ "$CS_RC" -eq 0 ]
check "status shows the healer running" grep -q "running (pid $HPID)" "$OUT/cs.out"
echo 0 >$ONLINE; sleep 1; echo 1 >$ONLINE
t0=$(cut -d' ' -f1 /proc/uptime)
i=0; rc=3
# The time of the first status that holds is when it started reading.
while [ $i -lt 40 ]; do
    t1=$(cut -d' ' -f1 /proc/uptime)
    cpushield status >/dev/null 2>&1; rc=$?
    [ $rc -eq 0 ] && break
    sleep 0.1; i=$((i + 1))
done
took=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")
check "status exits 0 within 3 s of CPU 3 coming back online, with no command but status run ($rc after $took s)" awk "BEGIN { exit !($rc == 0 && $took <= 3.0) }"
check "the healer counted a repair for cpu-online" heal_counted cpu-online
cat /run/cpushield/heal.json >"$OUT/heal.json"
info "healer state: $(cat "$OUT/heal.json")"
note "healer: status held again $took s after CPU 3 came online; its repair: $(sed -n 's/.*"last": *\({[^}]*}\).*/\1/p' "$OUT/heal.json")"
cs status; check "status shows the repair" grep -q "cpu-online 1" "$OUT/cs.out"
cs off; check "off with the healer: exit 0" [ "$CS_RC" -eq 0 ]
check "off stopped the healer" [ ! -d "/proc/$HPID" ]
snap after3
snap_equal before after3 "the healer's shield, CPU 3 offline and back, then off: the snapshot equals the one before on"
custom_state_end
result
