#!/bin/sh
# summary: on Debian 12 (6.1, no fair server) with systemd: on --tune starts
#   the starvation guard as cpushield-guard.service; a SCHED_FIFO 80 loop on
#   CPU 3 does not wedge stat_refresh, drop_caches, sync, a journald restart,
#   a new service, status or off; off stops the unit; no stall is logged
# distro: suites=bookworm default=no
. /job/lib.sh "$1"
SH=2-3
now_ds() { awk '{ printf "%d", $1 * 10 }' /proc/uptime; }
timed() { # timed WHAT CMD...: runs CMD with a 10 s limit (it may hang in the kernel)
    what=$1; shift
    t0=$(now_ds)
    "$@" >/dev/null 2>&1 &
    pid=$!
    done=0
    while [ $(( $(now_ds) - t0 )) -lt 100 ]; do
        kill -0 $pid 2>/dev/null || { done=1; break; }
        sleep 0.1
    done
    t=$(( $(now_ds) - t0 ))
    check "$what finishes within 10 s behind the loop ($((t / 10)).$((t % 10)) s)" [ $done = 1 ]
}
stalls() { dmesg | grep -cE 'blocked for more than|rcu.*[Ss]tall|soft lockup' || true; }
S0=$(stalls)
cs on $SH --tune
check "on --tune exits 0" [ "$CS_RC" = 0 ]
check "on says the guard watches the kernel work" grep -q "starvation guard watches them" "$OUT/cs.out"
check "cpushield-guard.service is active" systemctl is-active --quiet cpushield-guard.service
/job/cpushield run --cpu 3 --fifo 80 -- sh -c 'while :; do :; done' >/dev/null 2>&1 &
LOOP=$!
sleep 1
timed "cat /proc/sys/vm/stat_refresh" cat /proc/sys/vm/stat_refresh
timed "echo 3 > drop_caches" sh -c 'echo 3 > /proc/sys/vm/drop_caches'
timed "sync" sync
timed "systemctl restart systemd-journald" systemctl restart systemd-journald
timed "a new service" systemd-run --wait --quiet true
timed "status" /job/cpushield status
sleep 2
/job/cpushield status --json >"$OUT/status.json" 2>/dev/null
info "guard: $(grep -E '"(boosts|fifo_boosts|ran_us|longest_us)"' "$OUT/status.json" | tr -d ' \n')"
kill -9 $LOOP; wait $LOOP 2>/dev/null
cs off
check "off exits 0" [ "$CS_RC" = 0 ]
check "off stopped cpushield-guard.service" sh -c '! systemctl is-active --quiet cpushield-guard.service'
check "no guard process left" sh -c '! pgrep -x cpushield-guard'
check "no stall or hung task logged ($(( $(stalls) - S0 )) new)" [ "$(stalls)" -eq "$S0" ]
result
