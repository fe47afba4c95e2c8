#!/bin/sh
# summary: what --explain costs the timer probe: runs with and without it alternate on CPU 3, same length (records notes; benches/explain-overhead-guest.sh)
# vm: cpus=4
# Run: benches/explain-overhead-guest.sh, or
#      tests/vm/run.sh --no-build explain-overhead
. /guest/lib.sh "$1"
SECS=${OVERHEAD_SECS:-10}
ROUNDS=${OVERHEAD_ROUNDS:-4}
has_cpushield || { bad "cpushield binary in the guest"; result; }
# One row: min and avg (µs) of the CPU 3 line of measure's table.
figures() { awk '$1 == "3" && NF >= 13 { print $3, $4; exit }' "$1"; }
i=0
while [ $i -lt "$ROUNDS" ]; do
    for mode in plain explain; do
        extra=; [ $mode = explain ] && extra="--explain 100"
        cpushield measure --cpus 3 --duration "$SECS" $extra >"$OUT/$mode.$i" 2>&1
        check "round $i $mode: measure exits 0" [ $? -eq 0 ]
        set -- $(figures "$OUT/$mode.$i")
        note "OVERHEAD $i | $mode | ${1:-?} | ${2:-?}"
    done
    i=$((i + 1))
done
result
