#!/bin/sh
# summary: on killed with SIGKILL at several points, then off: snapshot equal
# vm: cpus=4
. /guest/lib.sh "$1"
SH=2-3
has_cpushield || { bad "cpushield binary in the guest"; result; }
custom_state
snap before
# time a whole 'on' to spread the kill points over it
t0=$(cut -d' ' -f1 /proc/uptime)
cs on $SH >/dev/null; t1=$(cut -d' ' -f1 /proc/uptime)
cs off >/dev/null; t2=$(cut -d' ' -f1 /proc/uptime)
info "here 'on' takes $(awk -v a=$t0 -v b=$t1 'BEGIN { print b - a }')s, 'off' $(awk -v a=$t1 -v b=$t2 'BEGIN { print b - a }')s"
snap after0; snap_equal before after0 "control: plain on/off restores"
for d in 0 0.002 0.005 0.01 0.02 0.05 0.1 0.2 0.3 0.5 1 2; do
    cpushield on $SH >"$OUT/on.killed.$d" 2>&1 &
    p=$!
    sleep $d
    kill -9 $p 2>/dev/null
    wait $p 2>/dev/null; rc=$?
    [ $rc -eq 137 ] && how=killed || how="had exited $rc"
    cs off >/dev/null; offrc=$CS_RC
    snap "k$d"
    [ "$offrc" -ne 0 ] && sed 's/^/    off| /' "$OUT/cs.out" | head -n 6
    if sh /guest/compare.sh "$OUT/snap.before" "$OUT/snap.k$d" >"$OUT/diff.k$d"; then
        ok "kill -9 after ${d}s ($how), off (exit $offrc): snapshot equal"
    else
        bad "kill -9 after ${d}s ($how), off (exit $offrc): snapshot equal"
        sed 's/^/    /' "$OUT/diff.k$d" | head -n 30
        sed 's/^/    off| /' "$OUT/cs.out" | head -n 20
        # leave a clean guest for the next kill point
        cs off >/dev/null
    fi
done
cs on $SH; check "after all that, on $SH still works (no stale lock)" [ "$CS_RC" -eq 0 ]
cs off; check "and off" [ "$CS_RC" -eq 0 ]
snap final; snap_equal before final "final snapshot equals the first"
custom_state_end
result
