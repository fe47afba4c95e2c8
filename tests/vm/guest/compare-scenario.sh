# The body of the `cpushield compare` scenarios (09, 10), sourced after
# lib.sh:  compare_scenario TARGET_CPUS
# Seconds per phase, load and probe from the kernel command line (run.sh
# --append 'cpushield.compare_duration=S cpushield.compare_load=L
# cpushield.compare_probe=P'), 10 s, full and timer by default: the
# scenario stays under a minute.
# Runs the three phases (idle, unshielded, shielded) and checks what the
# issue asks for: report files exist and are well-formed (results.json read
# back by `check_compare_dir`, since busybox has no JSON tool;
# PNG/SVG/HTML headers by hand), the three phases present with samples, the
# machine restored (snapshot before == after), no load process left, the
# virtualisation named in the output. Prints the ratios as info lines; no
# latency limit is asserted (emulated timing). The report directory is
# exported to the host (work/<run>/export/<kernel>/<scenario>/report/).
compare_scenario() {
    local target=$1 d=/tmp/compare-report hk before_pids dur load probe
    dur=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^cpushield.compare_duration=//p' | tail -n1)
    load=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^cpushield.compare_load=//p' | tail -n1)
    probe=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^cpushield.compare_probe=//p' | tail -n1)
    dur=${dur:-10}; load=${load:-full}; probe=${probe:-timer}
    has_cpushield || { bad "cpushield binary in the guest"; result; }
    command -v stress-ng >/dev/null && info "load driver: stress-ng ($(stress-ng --version 2>/dev/null | head -n1))"
    hk=$(cpus_minus "$(all_cpus)" "$target")
    info "kernel $KVER, $NCPUS vCPUs: measuring $target with the $probe probe, housekeeping $hk, load $load, ${dur}s per phase"
    snap before
    before_pids=" $(ls -d /proc/[0-9]* | sed 's|/proc/||' | tr '\n' ' ') "
    rm -rf "$d"
    CS_SHOW=40 cs compare --cpus "$target" --load "$load" --probe "$probe" --duration "$dur" --out "$d"
    check "compare --cpus $target --load $load --probe $probe --duration $dur exits 0" [ "$CS_RC" -eq 0 ]
    cp "$OUT/cs.out" "$OUT/compare.out"

    # -- the machine is given back, and nothing of the load is left
    snap after
    snap_equal before after "snapshot after compare equals the snapshot before"
    local p comm args strays=""
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        case "$before_pids" in *" $p "*) continue ;; esac
        comm=$(cat /proc/$p/comm 2>/dev/null) || continue
        args=$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)
        case "$comm $args" in
            stress-ng*|*__load-worker*|*cpushield*) strays="$strays $p($comm: $args)" ;;
        esac
    done
    check "no stress-ng, load worker or cpushield process is left${strays:+:$strays}" [ -z "$strays" ]
    check "no stress-ng process at all" [ -z "$(grep -l '^stress-ng' /proc/[0-9]*/comm 2>/dev/null)" ]
    check "no shield left (cpushield status: no shield active)" sh -c 'cpushield status 2>/dev/null | grep -q "no shield active"'
    local tmp_left
    tmp_left=$(ls -d /dev/shm/cpushield-load.* /tmp/cpushield-load.* /var/tmp/cpushield-load.* 2>/dev/null | tr '\n' ' ')
    check "the load's temporary files are gone${tmp_left:+ ($tmp_left)}" [ -z "$tmp_left" ]

    # -- the report files
    local f
    for f in results.json summary.txt histogram.svg histogram.png report.html; do
        check "$f written and not empty" [ -s "$d/$f" ]
    done
    check "histogram.png starts with the PNG signature" [ "$(head -c 4 "$d/histogram.png" | tail -c 3)" = PNG ]
    check "histogram.svg is an SVG document" sh -c "grep -q '<svg' '$d/histogram.svg' && tail -c 16 '$d/histogram.svg' | grep -q '</svg>'"
    check "report.html is an HTML page with the plot inline" sh -c "head -n1 '$d/report.html' | grep -qi '<!doctype html' && grep -q '<svg' '$d/report.html' && tail -c 16 '$d/report.html' | grep -q '</html>'"
    check "report.html needs no network" sh -c "! grep -q 'https\?://' '$d/report.html'"
    check "results.json is one JSON object" sh -c "[ \"\$(head -c 1 '$d/results.json')\" = '{' ] && tail -c 3 '$d/results.json' | grep -q '}'"
    check_compare_dir "$d" >"$OUT/check.out" 2>"$OUT/check.err"; local crc=$?
    check "check_compare_dir: results.json parses, files well-formed ($(head -c 300 "$OUT/check.err"))" [ $crc -eq 0 ]
    local ph
    for ph in idle unshielded shielded; do
        note "compare, $ph phase, on the measured CPUs per second: $(awk -F'\t' -v p=$ph '$1 == "interference" && $2 == p { printf "device %s, timer %s, IPI %s, other %s, softirq %s; other threads that ran there %s, %s runs/s", $3, $4, $5, $6, $7, $8, $9 }' "$OUT/check.out")"
        note "compare, $ph phase, the busiest of them (name:runs): $(awk -F'\t' -v p=$ph '$1 == "threads" && $2 == p { print $3 }' "$OUT/check.out")"
        check "phase $ph present with samples ($(awk -F'\t' -v p=$ph '$1 == "phase" && $2 == p { print $3 }' "$OUT/check.out"))" \
            awk -F'\t' -v p=$ph '$1 == "phase" && $2 == p && $3 > 0 { f = 1 } END { exit !f }' "$OUT/check.out"
    done
    # The shield in counts: no thread of the load (stress-ng or our own
    # workers, named cpushield) ran on the measured CPUs while shielded;
    # unshielded, the load's threads did (the counter sees them).
    local shielded_ran unshielded_ran
    shielded_ran=$(awk -F'\t' '$1 == "threads" && $2 == "shielded" { print $3 }' "$OUT/check.out")
    unshielded_ran=$(awk -F'\t' '$1 == "threads" && $2 == "unshielded" { print $3 }' "$OUT/check.out")
    check "shielded: no load thread among those that ran on $target (${shielded_ran:-none})" \
        sh -c '! printf "%s\n" "$1" | tr , "\n" | grep -q -e "^stress-ng" -e "^cpushield:"' _ "$shielded_ran"
    if [ "$load" != none ]; then
        check "unshielded: load threads ran on $target and were counted (${unshielded_ran:-none})" \
            sh -c 'printf "%s\n" "$1" | tr , "\n" | grep -q -e "^stress-ng" -e "^cpushield:"' _ "$unshielded_ran"
    fi
    check "summary.txt has the four phases and the ratios" sh -c "grep -q '^ *idle' '$d/summary.txt' && grep -q '^ *unshielded' '$d/summary.txt' && grep -q '^ *affinity' '$d/summary.txt' && grep -q '^ *shielded' '$d/summary.txt' && grep -q 'unshielded/shielded' '$d/summary.txt' && grep -q 'affinity/shielded' '$d/summary.txt'"
    # issue 58: compare's own shield takes its CPUs out of the kernel's
    # idle-balance mask; its note appears when kicks still reach them
    check "the shielded phase: no idle-balance kicks reached the measured CPUs ($(grep -o 'CPU [0-9]*: [0-9]* function-call IPIs and [0-9]* SCHED softirqs a second' "$d/summary.txt" | tr '\n' ' '))" \
        sh -c "! grep -q 'as idle-balance kicks do' '$d/summary.txt'"
    if awk -F'\t' '$1 == "machine" && $3 == "virtualised" { f = 1 } END { exit !f }' "$OUT/check.out"; then
        check "the output names the machine as virtualised, with the note on max samples" \
            sh -c "grep -q 'virtualised' '$OUT/compare.out' && grep -q 'swings by 100' '$OUT/compare.out'"
    else
        bad "cpushield sees this guest as not virtualised ($(awk -F'\t' '$1 == "machine"' "$OUT/check.out"))"
    fi

    # -- the figures (emulated timing: ratios only, nothing asserted)
    info "figures (TCG emulation, one boot; other guests on the host distort them):"
    awk -F'\t' '$1 == "phase" { printf "  phase %-11s samples %-7s max %9s us  p99.9 %9s us  over thresholds %s %s\n", $2, $3, $4, $5, $6, $7 }' "$OUT/check.out"
    awk -F'\t' '$1 == "ratio" { printf "  ratio %-9s unshielded/shielded %-8s affinity/shielded %-8s shielded/idle %s\n", $2, $3, $5, $4 }' "$OUT/check.out"
    # one line per run for benches/compare-guest.sh: PHASE_{samples,max,
    # p999,over100,over1000} and ratio_us_METRIC (unshielded/shielded),
    # ratio_si_METRIC (shielded/idle); "–" and "n/a" when unknown
    echo "CPUSHIELD-COMPARE: kernel=$KVER cpus=$NCPUS target=$target load=$load duration=$dur $(awk -F'\t' '
        $1 == "phase" { printf "%s_samples=%s %s_max=%s %s_p999=%s %s_over100=%s %s_over1000=%s ", $2, $3, $2, $4, $2, $5, $2, $6, $2, $7 }
        $1 == "ratio" { m = $2; gsub(/ /, "", m); sub(/^>/, "over", m); gsub(/µ/, "u", m); printf "ratio_us_%s=%s ratio_si_%s=%s ratio_as_%s=%s ", m, $3, m, $4, m, $5 }' "$OUT/check.out")"
    export_files "$d"
    result
}
