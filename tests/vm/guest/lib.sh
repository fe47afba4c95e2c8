# Guest-side helpers for scenarios (busybox sh).  Sourced by every scenario:
#   . /guest/lib.sh "$1"
# Output protocol on the serial console (read by tests/vm/run.sh):
#   CPUSHIELD-CHECK: ok|FAIL <what>      one assertion
#   CPUSHIELD-NOTE: <text>               a kernel behaviour worth recording
#   CPUSHIELD-RESULT: PASS|FAIL|SKIP <scenario> <details>   last line

SCEN=${1:-$(basename "$0" .sh)}
CHECKS=0
FAILED=0
OUT=/results/$SCEN
mkdir -p "$OUT"
KVER=$(uname -r)
case $KVER in 6.1.*) KSERIES=6.1 ;; 6.12.*) KSERIES=6.12 ;; *) KSERIES=$KVER ;; esac
NCPUS=$(nproc)

ok()   { CHECKS=$((CHECKS + 1)); echo "CPUSHIELD-CHECK: ok   $*"; }
bad()  { CHECKS=$((CHECKS + 1)); FAILED=$((FAILED + 1)); echo "CPUSHIELD-CHECK: FAIL $*"; }
note() { echo "CPUSHIELD-NOTE: [$KSERIES] $*"; }
info() { echo "  $*"; }

# check WHAT CMD...: ok when CMD exits 0
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

result() {
    local r=PASS
    [ "$FAILED" -gt 0 ] && r=FAIL
    [ "$CHECKS" -eq 0 ] && r=FAIL
    echo "$r" >"/results/$SCEN.result"
    echo "CPUSHIELD-RESULT: $r $SCEN ($CHECKS checks, $FAILED failed)"
    exit 0
}
skip() {
    echo SKIP >"/results/$SCEN.result"
    echo "CPUSHIELD-RESULT: SKIP $SCEN $*"
    exit 0
}

# cs ARGS...: run cpushield, show command, output and exit code.
# Sets CS_RC; output in $OUT/cs.out (stdout+stderr), stdout alone in $OUT/cs.stdout.
CS_N=0
cs() {
    CS_N=$((CS_N + 1))
    echo "\$ cpushield $*"
    cpushield "$@" >"$OUT/cs.stdout" 2>"$OUT/cs.stderr" </dev/null
    CS_RC=$?
    cat "$OUT/cs.stdout" "$OUT/cs.stderr" >"$OUT/cs.out"
    cp "$OUT/cs.out" "$OUT/cs.$CS_N.out"
    sed 's/^/  | /' "$OUT/cs.out" | head -n "${CS_SHOW:-60}"
    echo "  exit $CS_RC"
    return $CS_RC
}

# ---- cpu lists -------------------------------------------------------------
# awk functions shared by the checks: expand("0-2,5") -> " 0 1 2 5 "
AWK_CPULIB='
function expand(l,   n, i, a, r, lo, hi, c, out) {
    out = " "; if (l == "" || l == "(null)") return out
    n = split(l, a, ",")
    for (i = 1; i <= n; i++) {
        if (split(a[i], r, "-") == 2) { lo = r[1] + 0; hi = r[2] + 0 } else { lo = a[i] + 0; hi = lo }
        for (c = lo; c <= hi; c++) out = out c " "
    }
    return out
}
function overlap(a, b,   n, i, x) {   # a, b cpulists; 1 if they share a CPU
    a = expand(a); b = expand(b); n = split(a, x, " ")
    for (i = 1; i <= n; i++) if (x[i] != "" && index(b, " " x[i] " ")) return 1
    return 0
}
function subset(a, b,   n, i, x) {    # every CPU of a is in b
    a = expand(a); b = expand(b); n = split(a, x, " ")
    for (i = 1; i <= n; i++) if (x[i] != "" && !index(b, " " x[i] " ")) return 0
    return 1
}'
cpus_overlap() { awk -v a="$1" -v b="$2" "$AWK_CPULIB"' BEGIN { exit !overlap(a, b) }'; }
cpus_subset()  { awk -v a="$1" -v b="$2" "$AWK_CPULIB"' BEGIN { exit !subset(a, b) }'; }
cpus_equal()   { cpus_subset "$1" "$2" && cpus_subset "$2" "$1"; }
# hex mask ("f", "00000000,0000000c") -> cpulist
mask_to_list() {
    echo "$1" | tr -d ',' | awk '{
        s = tolower($0); n = length(s); out = ""; cpu = 0
        for (i = n; i >= 1; i--) {
            d = index("0123456789abcdef", substr(s, i, 1)) - 1
            for (b = 0; b < 4; b++) { if (d % 2) out = out (out == "" ? "" : ",") cpu; d = int(d / 2); cpu++ }
        }
        print out }'
}
all_cpus() { cat /sys/devices/system/cpu/online; }
# complement of a cpulist within the online CPUs
cpus_minus() { awk -v a="$1" -v b="$2" "$AWK_CPULIB"' BEGIN {
    n = split(expand(a), x, " "); b = expand(b); o = ""
    for (i = 1; i <= n; i++) if (x[i] != "" && !index(b, " " x[i] " ")) o = o (o == "" ? "" : ",") x[i]
    print o }'; }

# ---- tasks -----------------------------------------------------------------
# tasks_table: "TID TGID PPID CPUS NAME" for every thread (one awk over all
# status files: the only extra tasks are this shell's children).
tasks_table() {
    awk '
    function flush() { if (tid != "") print tid, tgid, ppid, cpus, name; tid = tgid = ppid = cpus = name = "" }
    FNR == 1 { flush() }
    /^Name:/ { name = $0; sub(/^Name:[ \t]*/, "", name) }
    /^Pid:/ { tid = $2 }
    /^Tgid:/ { tgid = $2 }
    /^PPid:/ { ppid = $2 }
    /^Cpus_allowed_list:/ { cpus = $2 }
    END { flush() }' /proc/[0-9]*/task/[0-9]*/status 2>/dev/null
}
is_kthread_line() { :; }
# Per-CPU kernel threads that a shield reports by kind instead of moving.
PERCPU_KTHREADS='^(ksoftirqd/|migration/|cpuhp/|kworker/[0-9]+:|rcuc/|rcuop/|rcuog/|idle_inject/|watchdog/|irq_work/|posixcputmr/|kworker/R-|irq/|swapper/)'

# ---- irqs ------------------------------------------------------------------
irq_name() { # irq_name N -> the action name (last column) of /proc/interrupts
    awk -v n="$1:" '$1 == n { print $NF; exit }' /proc/interrupts
}
irq_list() { for d in /proc/irq/[0-9]*; do [ -f "$d/smp_affinity_list" ] && echo "${d##*/}"; done | sort -n; }
# IRQs that refuse a new affinity: write each one's own value back.
refusing_irqs() {
    local n v
    for n in $(irq_list); do
        v=$(cat /proc/irq/$n/smp_affinity_list 2>/dev/null) || continue
        if ! echo "$v" 2>/dev/null >/proc/irq/$n/smp_affinity_list; then echo "$n"; fi
    done
}
# irq number by name pattern from /proc/interrupts (first match)
irq_by_name() { awk -v p="$1" '$NF ~ p { sub(":", "", $1); print $1; exit }' /proc/interrupts; }

# ---- cgroups ---------------------------------------------------------------
cgroup_mode() {
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo v2
    elif [ -f /sys/fs/cgroup/cpuset/cpuset.cpus ]; then echo v1
    else echo none; fi
}
# v2: directories holding a partition ("path partition-state effective-cpus")
v2_partitions() {
    find /sys/fs/cgroup -mindepth 1 -name cpuset.cpus.partition 2>/dev/null | while read -r f; do
        d=${f%/cpuset.cpus.partition}
        p=$(cat "$f")
        [ "$p" = member ] && continue
        echo "${d#/sys/fs/cgroup} $(cat "$d/cpuset.cpus.effective") $p"
    done
}

# ---- snapshots -------------------------------------------------------------
snap() { sh /guest/snapshot.sh >"$OUT/snap.$1"; }
# snap_equal A B WHAT: compare two snapshots; prints the differences
snap_equal() {
    if sh /guest/compare.sh "$OUT/snap.$1" "$OUT/snap.$2" >"$OUT/diff.$1.$2"; then
        ok "$3"
        return 0
    fi
    bad "$3"
    sed 's/^/    /' "$OUT/diff.$1.$2" | head -n 60
    return 1
}

# a tiny probe: print own affinity (used as a forked child)
self_cpus() { awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status; }

has_cpushield() { command -v cpushield >/dev/null 2>&1; }
