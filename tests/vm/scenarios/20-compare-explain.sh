#!/bin/sh
# summary: compare --explain on 4 vCPUs under full load: unshielded, the load's threads are among the causes of slow samples; shielded, they are not; the causes are in summary.txt, results.json and report.html; tracefs and the machine as before
# vm: cpus=4 kernels=6.12
. /guest/lib.sh "$1"
has_cpushield || { bad "cpushield binary in the guest"; result; }
TH=200
D=/tmp/compare-explain
snap before
rm -rf "$D"
CS_SHOW=60 cs compare --cpus 2-3 --load full --duration 5 --explain $TH --out "$D"
check "compare --cpus 2-3 --load full --duration 5 --explain $TH exits 0" [ "$CS_RC" -eq 0 ]
snap after
snap_equal before after "snapshot after compare --explain equals the snapshot before"
TR=/sys/kernel/tracing; [ -d $TR/instances ] || TR=/sys/kernel/debug/tracing
check "no trace instance left ($(ls $TR/instances | tr '\n' ' '))" [ -z "$(ls $TR/instances)" ]
check "no explain record left" [ ! -e /run/cpushield/explain.json ]

info "results.json: $(wc -c <"$D/results.json") bytes [$(el)]"
# The histograms' bucket counts are most of the file (a number a line,
# 3.7 MB in all); the checks below read no numeric array, so those lines
# are dropped before the JSON is flattened (busybox awk under TCG).
grep -Ev '^[[:space:]]*[-+.0-9eE]+,?$' "$D/results.json" | json_flat >"$OUT/results.flat"
info "flattened: $(wc -l <"$OUT/results.flat") values [$(el)]"
# phase_of INDEX -> idle|unshielded|shielded
phase_index() { awk -F '\t' -v want="$1" '$1 ~ /^\.phases\[[0-9]+\]\.phase$/ && $2 == want { i = $1; sub(/^\.phases\[/, "", i); sub(/\].*/, "", i); print i; exit }' "$OUT/results.flat"; }
# causes_of PHASE: the phase's cause names, one per line
causes_of() {
    i=$(phase_index "$1")
    [ -n "$i" ] || return 0
    awk -F '\t' -v p=".phases[$i].explain.causes[" 'index($1, p) == 1 && $1 ~ /\]\.cause$/ { print $2 }' "$OUT/results.flat"
}
for ph in idle unshielded shielded; do
    i=$(phase_index $ph)
    th=$(awk -F '\t' -v p=".phases[$i].explain.threshold_us" '$1 == p { print $2 }' "$OUT/results.flat")
    over=$(awk -F '\t' -v p=".phases[$i].explain.over_threshold" '$1 == p { print $2 }' "$OUT/results.flat")
    check "$ph: results.json has the phase's causes (threshold ${th:-none} µs, $over samples over)" [ "${th%.*}" = "$TH" ]
    info "$ph causes: $(causes_of $ph | head -n 8 | tr '\n' ';')"
done
causes_of unshielded >"$OUT/causes.unshielded"
causes_of shielded >"$OUT/causes.shielded"
check "unshielded: a stress-ng thread is among the causes ($(grep stress-ng "$OUT/causes.unshielded" | head -n 3 | tr '\n' ';'))" grep -q 'stress-ng' "$OUT/causes.unshielded"
check "shielded: no stress-ng thread among the causes ($(grep stress-ng "$OUT/causes.shielded" | tr '\n' ';'))" sh -c "! grep -q stress-ng '$OUT/causes.shielded'"
check "summary.txt has the causes per phase" grep -q 'What delayed the slow samples' "$D/summary.txt"
sed -n '/What delayed/,$p' "$D/summary.txt" | head -n 30 | sed 's/^/  summary| /'
check "report.html has the causes section" grep -q '<h2>What delayed the slow samples</h2>' "$D/report.html"
check "report.html has the chart (one bar per phase)" grep -q 'share of the time of the samples over the threshold' "$D/report.html"
export_files "$D"
result
