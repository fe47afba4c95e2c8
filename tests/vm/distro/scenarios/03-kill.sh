#!/bin/sh
# summary: SIGKILL during on at several moments, then off: threads, IRQs,
#   cgroups, unit properties and irqbalance exactly as before
. /job/lib.sh "$1"
SH=2-3
# irqbalance places the IRQs it balances a few seconds after it starts
# (the scenario before this one restarted it): let it settle first. A ban
# given through its control socket makes it rebuild and place them anew
# as a restart does (SYSTEMD-NOTES 9): its single-CPU moves are its own.
irqbalance_settle
snap before
for delay in 0.5 3 6; do
    /job/cpushield on $SH >"$OUT/on.$delay" 2>&1 &
    p=$!
    sleep $delay
    kill -9 $p 2>/dev/null && info "killed on after ${delay}s" || info "on finished before ${delay}s"
    wait $p 2>/dev/null
    cs off
    check "kill after ${delay}s: off exits 0" [ "$CS_RC" = 0 ]
    irqbalance_settle
    snap after.$delay
    snap_equal_after_irqbalance before after.$delay "kill after ${delay}s: everything as before"
done
result
