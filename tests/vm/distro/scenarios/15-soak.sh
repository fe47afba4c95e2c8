#!/bin/sh
# summary: a shield that lives (issue 64), by hand, about 40 minutes: a
#   shield made by on 2-3 --tune=all,rt-throttling (the healer by default) kept through
#   ROUNDS rounds (default 50) of a 1 kHz FIFO 80 sleeper through run on
#   CPU 3, a FIFO 80 busy poller through run on CPU 2 every other round,
#   transient services, daemon-reload, a journald restart every third
#   round and a change in place 2-3 <-> 1-3 every fourth; then RUNS runs of
#   true (default 1000); then CPU 3 offline and online, a virtio-net card
#   hot-added through QEMU's monitor and taken away. Prints per round
#   the journal's size and records, the guard's and the healer's RSS and
#   open files; checks status exit 0 every round, /run/cpushield after it
#   all at most 10 % larger than after 5 rounds, the healer's repair of
#   CPU 3 and of the card within 2 s each (issue 64's bound; run it on an
#   otherwise idle host: under emulation a second guest beside it slows the
#   repair past it), and off giving back exactly what was before
# distro: suites=bookworm,trixie default=no time=4200
. /job/lib.sh "$1"
ROUNDS=${CPUSHIELD_SOAK_ROUNDS:-50}
RUNS=${CPUSHIELD_SOAK_RUNS:-1000}
# The healer runs by default: no --heal here
OPTS="--tune=all,rt-throttling"
irqbalance_settle
snap before
cs on 2-3 $OPTS
check "on 2-3 $OPTS exits 0" [ "$CS_RC" = 0 ]
size() { du -sb /run/cpushield | cut -f1; }
records() { /job/cpushield status --json 2>/dev/null | sed -n 's/.*"records": *\([0-9]*\).*/\1/p' | head -n1; }
proc_of() { pid=$(systemctl show -p MainPID --value "$1" 2>/dev/null); [ "${pid:-0}" -gt 0 ] && echo "rss $(awk '/VmRSS/ {print $2}' /proc/$pid/status) kB fds $(ls /proc/$pid/fd | wc -l)" || echo none; }
# A loop of $1 seconds by /proc/uptime, sleeping 1 ms a turn or not.
SLEEPER='end=$(( $(cut -d. -f1 /proc/uptime) + $1 )); while read -r u _ </proc/uptime && [ "${u%.*}" -lt "$end" ]; do sleep 0.001; done'
POLLER='end=$(( $(cut -d. -f1 /proc/uptime) + $1 )); while read -r u _ </proc/uptime && [ "${u%.*}" -lt "$end" ]; do :; done'
held=0; cpus=2-3; size5=""
r=1
while [ $r -le "$ROUNDS" ]; do
    # Each loop ends by itself (the shell's builtins only): a timeout
    # process beside a FIFO 80 busy loop on its CPU would never run.
    /job/cpushield run --cpu 3 --fifo 80 -- sh -c "$SLEEPER" sleeper 3 >/dev/null 2>&1 &
    sleeper=$!
    if [ $((r % 2)) = 0 ]; then
        /job/cpushield run --cpu 2 --fifo 80 -- sh -c "$POLLER" poller 2 >/dev/null 2>&1 &
        poller=$!
    else poller=""; fi
    systemd-run --quiet --unit "soak-$r" sleep 1 >/dev/null 2>&1
    systemctl daemon-reload
    [ $((r % 3)) = 0 ] && systemctl restart systemd-journald
    wait $sleeper; [ -n "$poller" ] && wait $poller
    if [ $((r % 4)) = 0 ]; then
        if [ $cpus = 2-3 ]; then cpus=1-3; else cpus=2-3; fi
        if ! /job/cpushield on $cpus $OPTS >"$OUT/change.$r" 2>&1; then
            check "round $r: on $cpus in place exits 0" false
            # what the kernel and systemd said of it
            sed 's/^/    | /' "$OUT/change.$r" | head -n 5
            for f in /sys/fs/cgroup/*/cpuset.cpus; do echo "    cgroup ${f%/cpuset.cpus}: cpus $(cat "$f") effective $(cat "${f%.cpus}.cpus.effective") $(cat "${f%.cpus}.cpus.partition" 2>/dev/null)"; done
            journalctl -b -q --no-pager -u init.scope -n 400 2>/dev/null | grep -i -E 'cpuset|allowedcpus|cpushield.slice' | tail -n 8 | sed 's/^/    journal: /'
        fi
    fi
    /job/cpushield status >"$OUT/status.$r" 2>&1 && held=$((held + 1)) || info "round $r: status exit $? ($(grep -m1 broken "$OUT/status.$r"))"
    info "round $r: /run/cpushield $(size) bytes, journal $(records) records; guard $(proc_of cpushield-guard.service); healer $(proc_of cpushield-heal.service)"
    # the journal itself at round 5 and at the end, for what grew
    # (results/<suite>/15-soak/ on the host)
    [ $r = 5 ] && size5=$(size) && cp -r /run/cpushield "$OUT/run-cpushield.5"
    r=$((r + 1))
done
check "status exit 0 in $held of $ROUNDS rounds" [ "$held" = "$ROUNDS" ]
[ $cpus = 2-3 ] || { cs on 2-3 $OPTS; check "back to 2-3 in place" [ "$CS_RC" = 0 ]; }
t0=$(date +%s)
n=0; failed=0
while [ $n -lt "$RUNS" ]; do
    /job/cpushield run --cpu 3 -- true || failed=$((failed + 1)); n=$((n + 1))
    [ $((n % 100)) = 0 ] && info "$n runs of true: $(( $(date +%s) - t0 )) s, $failed failed, /run/cpushield $(size) bytes"
done
info "$RUNS runs of true took $(( $(date +%s) - t0 )) s, $failed failed"
check "$RUNS runs of true: none failed" [ "$failed" = 0 ]
end=$(size)
cp -r /run/cpushield "$OUT/run-cpushield.end"
note "kernel $(uname -r): soak: /run/cpushield after 5 rounds $size5 bytes, after $ROUNDS rounds and $RUNS runs $end bytes ($(records) records)"
check "/run/cpushield after it all ($end bytes) at most 10 % over its size after 5 rounds ($size5)" awk "BEGIN { exit !($end <= 1.1 * $size5) }"
# The kernel may refuse the offline (EIO was seen once on 6.1 after the
# rounds): then nothing came back online and the healer's check below
# would pass without an event, so it fails here, with the kernel's words.
off_rc=0; echo 0 >/sys/devices/system/cpu/cpu3/online 2>"$OUT/offline.err" || off_rc=$?
check "CPU 3 taken offline under the shield (exit $off_rc$(tr '\n' ' ' <"$OUT/offline.err" | sed 's/^./: &/'))" [ "$(cat /sys/devices/system/cpu/cpu3/online)" = 0 ]
[ $off_rc = 0 ] || dmesg | tail -n 20 | sed 's/^/    dmesg| /'
sleep 1; echo 1 >/sys/devices/system/cpu/cpu3/online
status_holds_after "$(cut -d' ' -f1 /proc/uptime)"; rc=$HELD_RC; took=$HELD_AFTER
note "kernel $(uname -r): soak: CPU 3 offline and online: status exit $rc $took s after; healer $(sed -n 's/.*"last": *\({.*}\)}$/\1/p' /run/cpushield/heal.json)"
check "status exits 0 within 2 s of CPU 3 coming back ($rc at $took s)" awk "BEGIN { exit !($rc == 0 && $took <= 2.0) }"
# A virtio network card hot-added through QEMU's monitor (run.sh does it
# when asked on the console), then taken away again before off.
ndev() { ls /sys/bus/pci/devices | wc -l; }
n0=$(ndev)
echo "CPUSHIELD-MONITOR: device_add virtio-net-pci,id=soaknic,romfile="
i=0; while [ "$(ndev)" = "$n0" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "the guest saw the card QEMU's monitor hot-added within 30 s" [ "$(ndev)" != "$n0" ]
status_holds_after "$(cut -d' ' -f1 /proc/uptime)"; rc=$HELD_RC; took=$HELD_AFTER
note "kernel $(uname -r): soak: a virtio-net card hot-added: status exit $rc $took s after; healer $(sed -n 's/.*"last": *\({.*}\)}$/\1/p' /run/cpushield/heal.json)"
check "status exits 0 within 2 s of the card's arrival ($rc at $took s)" awk "BEGIN { exit !($rc == 0 && $took <= 2.0) }"
echo "CPUSHIELD-MONITOR: device_del soaknic"
i=0; while [ "$(ndev)" != "$n0" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "the card is gone again (device_del)" [ "$(ndev)" = "$n0" ]
units() { systemctl list-units --all --no-legend --plain 'cpushield.slice' 'cpushield-run-*' 'cpushield-out-*' 2>/dev/null | awk '{print $1 " " $3 "/" $4}' | tr '\n' ' '; }
info "cpushield's units before off: $(units)"
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
left=$(units)
check "no unit of the shield's is left loaded after off (${left:-none})" [ -z "$left" ]
# irqbalance 1.9 (Debian 12) has ended during the soak's CPU
# hotplug and card: its own last words, when it is not running
systemctl is-active --quiet irqbalance || info "irqbalance is $(systemctl is-active irqbalance); its journal ends: $(journalctl -u irqbalance --no-pager -o cat 2>/dev/null | tail -n 5 | tr '\n' '|')"
irqbalance_settle
snap after
snap_equal_after_irqbalance before after "after the soak, off: everything as before"
result
