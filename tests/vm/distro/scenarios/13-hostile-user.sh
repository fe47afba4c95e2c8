#!/bin/sh
# summary: a local user without privileges (mallory, made here) cannot turn
#   root's cpushield against root (issue 63, docs/security.md), each case
#   with a check that failed on the cpushield before it: a TIOCSTI of a
#   command started by `run --user` inside root's terminal (util-linux
#   script, root's interactive shell) is not run by root's shell (control:
#   the same injector as mallory in root's session, and as root, is); the
#   command gets a session of its own and none of root's environment,
#   descriptors or capabilities, with its CPU, policy and cgroup as asked;
#   links mallory planted in the textfile directory she owns, in
#   report directories she made first in /tmp and at a --histfile are
#   never followed (their root-only 0600 target keeps its content and
#   mtime) and the files land where they should; process names with ESC
#   and a newline reach on's and status's output escaped, no raw control
#   byte; a results.json whose phase forges a sample line is refused
#   (exit 2); a journal record rewritten to name etc/shadow (checksum left
#   stale, then recomputed) is refused by off (exit 5) and named, shadow
#   untouched, the rest undone; /run/cpushield made 0700 by the guard or
#   measure --explain coming first, and one others may write refused.
#   Everything is undone (user, files, run directory), snapshot equal.
# distro: suites=bookworm
. /job/lib.sh "$1"
SH=2-3
M=mallory
CTRL=$(printf '\001-\010\013-\037\177')
# raw_controls FILE: how many raw control bytes (other than newline and
# tab) FILE holds: an escape sequence of a name would show here
raw_controls() { tr -d '\n\t' <"$1" | tr -dc "$CTRL" | wc -c; }
sum() { sha256sum "$1" | cut -d' ' -f1; }
mtime() { stat -c %y "$1"; }
as_m() { setpriv --reuid=$M --regid=$M --init-groups "$@"; }

info "kernel $(uname -r), $(systemctl --version | head -n1), $(script --version 2>&1 | head -n1), $(perl -e 'print "perl $^V"')"
if [ -e /proc/sys/dev/tty/legacy_tiocsti ]; then
    note "dev.tty.legacy_tiocsti = $(cat /proc/sys/dev/tty/legacy_tiocsti) (kernel $(uname -r))"
else
    note "kernel $(uname -r) has no dev.tty.legacy_tiocsti (6.2+): TIOCSTI into one's controlling terminal is always allowed"
fi

# The hostile user, and root's files she would like overwritten.
if ! id $M >/dev/null 2>&1; then
    useradd -m -U -s /bin/sh $M || check "useradd $M" false
fi
MUID=$(id -u $M)
info "user $M uid $MUID, home $(getent passwd $M | cut -d: -f6)"
for t in textfile report hist; do
    printf 'root only: %s target\n' "$t" >/root/cs-target-$t
    chmod 0600 /root/cs-target-$t
    touch -d '2020-01-01 00:00:00' /root/cs-target-$t
done
SHADOW_SUM=$(sum /etc/shadow); SHADOW_TIME=$(mtime /etc/shadow)
# The injector: pushes "touch FILE\n" into its terminal with TIOCSTI, one
# character at a time, then says which terminal took it.
cat >/usr/local/bin/cs-inject <<'EOF'
#!/usr/bin/perl
my $f = shift;
for my $c (split //, "touch $f\n") { ioctl(STDIN, 0x5412, $c) or die "TIOCSTI refused: $!\n"; }
print "injected into ", readlink("/proc/self/fd/0"), " as uid $<\n";
EOF
# The probe: what a command sees of its process
cat >/usr/local/bin/cs-probe <<'EOF'
#!/bin/sh
echo "uid=$(id -u)"
echo "secret=[${SECRET-}]"
echo "path=$PATH"
echo "home=$HOME user=${USER-} logname=${LOGNAME-} shell=${SHELL-}"
echo "pwd=$(pwd)"
if [ -e /proc/$$/fd/7 ]; then echo "fd7=open"; else echo "fd7=closed"; fi
echo "fds=$(ls /proc/$$/fd | tr '\n' ' ')"
grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/$$/status
echo "sid=$(cut -d' ' -f6 /proc/$$/stat)"
echo "tty=$(readlink /proc/$$/fd/0)"
echo "cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/$$/status)"
echo "policy=$(chrt -p $$ | tr '\n' ' ')"
echo "cgroup=$(cat /proc/$$/cgroup)"
EOF
chmod 0755 /usr/local/bin/cs-inject /usr/local/bin/cs-probe
RUN_BEFORE=absent; [ -d /run/cpushield ] && RUN_BEFORE=$(stat -c %a /run/cpushield)
irqbalance_settle
snap before

# --- 8. /run/cpushield: private whoever makes it first ----------------------
rm -rf /run/cpushield
timeout -s TERM 8 /job/cpushield guard --cpus 3 >"$OUT/guard.out" 2>&1
info "guard --cpus 3 for 8 s: exit $? ($(head -c 300 "$OUT/guard.out" | tr '\n' ' '))"
check "8: the guard coming first made /run/cpushield 0700 root ($(stat -c '%a %U' /run/cpushield 2>&1))" \
    [ "$(stat -c '%a %U' /run/cpushield 2>/dev/null)" = "700 root" ]
rm -rf /run/cpushield
cs measure --cpus 3 --duration 2 --explain 2000
check "8: measure --explain runs (exit $CS_RC)" [ "$CS_RC" = 0 ]
check "8: measure --explain coming first made /run/cpushield 0700 root ($(stat -c '%a %U' /run/cpushield 2>&1))" \
    [ "$(stat -c '%a %U' /run/cpushield 2>/dev/null)" = "700 root" ]
rm -rf /run/cpushield
mkdir -m 0777 /run/cpushield
cs status
check "8: a /run/cpushield others may write (0777) is refused by status (exit $CS_RC) and named" \
    sh -c "[ '$CS_RC' != 0 ] && grep -q '/run/cpushield' '$OUT/cs.out' && grep -q '0777' '$OUT/cs.out'"
chmod 0755 /run/cpushield; chown $M /run/cpushield
cs on $SH
check "8: a /run/cpushield owned by $M is refused by on (exit $CS_RC), naming its owner" \
    sh -c "[ '$CS_RC' != 0 ] && grep -q 'uid $MUID' '$OUT/cs.out'"
check "8: and nothing was shielded" sh -c '! ls -d /sys/fs/cgroup/cpushield* 2>/dev/null'
# (a cpushield that took that directory shielded: undone before it goes)
[ "$CS_RC" = 0 ] && /job/cpushield off >/dev/null 2>&1
rm -rf /run/cpushield

# --- 5. escape in a name: processes of mallory's pinned to CPU 3 before on --
as_m taskset -c 3 perl -e 'open my $f, ">", "/proc/self/comm" or die; print $f "x\e[8m"; close $f; sleep 1000' &
as_m taskset -c 3 perl -e 'open my $f, ">", "/proc/self/comm" or die; print $f "q\nFORGED LINE"; close $f; sleep 1000' &
sleep 2
NAMED=$(ps -u $M -o pid= | tr '\n' ' ')
info "$M's processes pinned to CPU 3: $NAMED; their names' bytes: $(for p in $NAMED; do echo "$p:$(od -An -tx1 /proc/$p/comm | tr -s ' \n' ' ')"; done | tr '\n' ';')"
check "5: two processes of $M's, pinned to CPU 3, renamed themselves" [ "$(echo $NAMED | wc -w)" = 2 ]
cs on $SH
check "5: on $SH exits 0" [ "$CS_RC" = 0 ]
cp "$OUT/cs.out" "$OUT/on.out"
n=$(raw_controls "$OUT/on.out")
check "5: on's output holds no raw control byte ($n; od: $(od -An -tx1 "$OUT/on.out" | grep -c ' 1b') lines with 1b)" [ "$n" = 0 ]
check "5: on names the kept process escaped (x, backslash, e[8m)" grep -qF 'x\e[8m' "$OUT/on.out"
check "5: on names the other escaped (q, backslash, nFORGED LINE) and forges no line" \
    sh -c "grep -qF 'q\\nFORGED LINE' '$OUT/on.out' && ! grep -q '^FORGED' '$OUT/on.out'"
# systemd's own view of a scope for the process named with a newline
NLPID=""; for p in $NAMED; do grep -q FORGED /proc/$p/comm 2>/dev/null && NLPID=$p; done
if grep -q "NOT kept there" "$OUT/on.out" && [ -n "$NLPID" ]; then
    busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager \
        StartTransientUnit 'ssa(sv)a(sa(sv))' cs-nl-$NLPID.scope fail 1 PIDs au 1 $NLPID 0 >"$OUT/nl-scope" 2>&1
    note "systemd $(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p'): a transient scope for a process whose name holds a newline (pid $NLPID): busctl exit $?, $(tr '\n' ' ' <"$OUT/nl-scope")"
fi
cs status
cp "$OUT/cs.out" "$OUT/status.out"
n=$(raw_controls "$OUT/status.out")
check "5: status's output holds no raw control byte ($n)" [ "$n" = 0 ]
check "5: status names the kept process escaped (x, backslash, e[8m)" grep -qF 'x\e[8m' "$OUT/status.out"
check "5: status forges no line" sh -c "! grep -q '^FORGED' '$OUT/status.out'"

# --- 2. root's environment, descriptors, capabilities, session -------------
export SECRET="xyz-root-token" HOME=/root
exec 7</etc/hostname
cd /root
ROOT_SID=$(cut -d' ' -f6 /proc/$$/stat)
/usr/local/bin/cs-probe >"$OUT/probe.root" 2>&1
info "control, the probe as root: $(tr '\n' ' ' <"$OUT/probe.root")"
check "2: control: root's own probe sees SECRET and fd 7" \
    sh -c "grep -q 'secret=\[xyz-root-token\]' '$OUT/probe.root' && grep -q fd7=open '$OUT/probe.root'"
cs run --user $M --cpu 3 --fifo 10 -- /usr/local/bin/cs-probe
cp "$OUT/cs.out" "$OUT/probe.run"
P=$OUT/probe.run
check "2: run --user exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "2: the command runs as $M (uid $MUID)" grep -qx "uid=$MUID" "$P"
check "2: it does not see root's SECRET" grep -qx 'secret=\[\]' "$P"
check "2: PATH is the safe path, not root's (/job first)" grep -qx 'path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' "$P"
check "2: HOME, USER, LOGNAME, SHELL are $M's" grep -qx "home=/home/$M user=$M logname=$M shell=/bin/sh" "$P"
check "2: root's working directory /root (which $M may not enter) is not kept: $M's home" grep -qx "pwd=/home/$M" "$P"
check "2: root's descriptor 7 (no close-on-exec) is closed in the command" grep -qx 'fd7=closed' "$P"
check "2: CapInh, CapPrm, CapEff, CapAmb all 0" sh -c "[ \$(grep -cE '^Cap(Inh|Prm|Eff|Amb):[[:space:]]+0+\$' '$P') = 4 ]"
check "2: a session of its own (sid $(sed -n 's/^sid=//p' "$P"), root's $ROOT_SID)" \
    sh -c "s=\$(sed -n 's/^sid=//p' '$P'); [ -n \"\$s\" ] && [ \"\$s\" != '$ROOT_SID' ]"
check "2: still on CPU 3, SCHED_FIFO 10, in the shield's cgroup" \
    sh -c "grep -qx 'cpus=3' '$P' && grep -q 'SCHED_FIFO.*priority: 10' '$P' && grep -q 'cgroup=.*cpushield' '$P'"
cd /tmp
cs run --user $M --cpu 3 --preserve-env=SECRET -- /usr/local/bin/cs-probe
check "2: control: --preserve-env=SECRET keeps it, and a working directory $M may enter (/tmp) is kept" \
    sh -c "grep -q 'secret=\[xyz-root-token\]' '$OUT/cs.out' && grep -qx 'pwd=/tmp' '$OUT/cs.out'"
exec 7<&-
unset SECRET

# --- 1. terminal injection: root's interactive shell in a real terminal ----
# in_terminal OUT LINE: root's interactive shell (dash -i) on a terminal of
# its own (util-linux script: a pty, the shell's controlling terminal) is
# typed LINE; once LINE has run, "exit". What was pushed into that
# terminal's input meanwhile is read by root's shell before "exit".
in_terminal() {
    rm -f /tmp/cs-typed
    { echo "$2; touch /tmp/cs-typed"
      i=0; while [ ! -e /tmp/cs-typed ] && [ $i -lt 240 ]; do sleep 0.5; i=$((i + 1)); done
      sleep 2; echo exit; sleep 1; } |
        SHELL=/bin/sh timeout 180 script -qec 'sh -i' /dev/null >"$1" 2>&1
    info "in root's terminal: $2 -> $(tr -d '\r' <"$1" | tr '\n' '|' | cut -c1-400)"
}
rm -f /root/pwned-*
in_terminal "$OUT/tty.direct" "echo root-tty=\$(tty); /usr/local/bin/cs-inject /root/pwned-direct"
check "1: control: root's shell runs what root's own process pushed (/root/pwned-direct: $(stat -c %U /root/pwned-direct 2>&1))" [ -e /root/pwned-direct ]
in_terminal "$OUT/tty.setpriv" "setpriv --reuid=$M --regid=$M --init-groups /usr/local/bin/cs-inject /root/pwned-setpriv"
check "1: control: root's shell runs, as root, what $M's process in its session pushed (/root/pwned-setpriv: $(stat -c %U /root/pwned-setpriv 2>&1))" \
    [ "$(stat -c %U /root/pwned-setpriv 2>/dev/null)" = root ]
in_terminal "$OUT/tty.run" "echo root-tty=\$(tty); /job/cpushield run --user $M --cpu 3 -- /usr/local/bin/cs-inject /root/pwned-run; echo run-exit=\$?"
check "1: run --user: the injector ran and its TIOCSTI succeeded on a terminal" grep -q "injected into /dev/pts/[0-9]* as uid $MUID" "$OUT/tty.run"
rt=$(tr -d '\r' <"$OUT/tty.run" | sed -n 's/.*root-tty=\(\/dev\/pts\/[0-9]*\).*/\1/p' | head -n1)
ct=$(tr -d '\r' <"$OUT/tty.run" | sed -n 's/.*injected into \(\/dev\/pts\/[0-9]*\).*/\1/p' | head -n1)
check "1: run --user: the command's terminal ($ct) is not root's ($rt)" sh -c "[ -n '$ct' ] && [ '$ct' != '$rt' ]"
check "1: run --user exits 0" sh -c "tr -d '\r' <'$OUT/tty.run' | grep -q 'run-exit=0'"
check "1: run --user: root's shell did not run the injected command (/root/pwned-run: $(stat -c 'owned by %U' /root/pwned-run 2>/dev/null || echo absent))" [ ! -e /root/pwned-run ]
rm -f /root/pwned-* /tmp/cs-typed

# --- 7. a forged journal record --------------------------------------------
# forge MODE: rewrites the first IRQ write record of the journal (undone by
# writing back its prior value) to name etc/shadow; MODE stale leaves its
# checksum, resealed computes it again (CRC-32 of the record's compact JSON
# without it, the check being that this gives the unaltered record's own).
cat >/tmp/cs-forge.py <<'EOF'
import glob, json, sys, zlib
def crc(rec):
    body = {k: v for k, v in rec.items() if k != "crc32"}
    return "%08x" % (zlib.crc32(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()) & 0xffffffff)
mode = sys.argv[1]
if mode == "restore":
    # the forged record's path back to what it was (argv[2])
    for seg in sorted(glob.glob("/run/cpushield/journal/[0-9]*.json")):
        recs = json.load(open(seg))
        for r in recs:
            if r.get("path") == "etc/shadow":
                r["path"] = sys.argv[2]
                r.pop("crc32", None)
        with open(seg, "w") as f:
            json.dump(recs, f, separators=(",", ":"), ensure_ascii=False)
    sys.exit(0)
for seg in sorted(glob.glob("/run/cpushield/journal/[0-9]*.json")):
    recs = json.load(open(seg))
    for i, r in enumerate(recs):
        if not (r.get("action") == "write" and r.get("undo") == "previous" and "prior" in r
                and r["path"].startswith("proc/irq/") and r["path"].endswith("/smp_affinity_list")):
            continue
        # an IRQ the shield did move: its file reads what was written
        if open("/" + r["path"]).read().strip() == r["value"] != r["prior"]:
            same = r.get("crc32") == crc(r)
            orig = r["path"]
            r["path"] = "etc/shadow"
            if mode == "resealed":
                r["crc32"] = crc(r)
            with open(seg, "w") as f:
                json.dump(recs, f, separators=(",", ":"), ensure_ascii=False)
            print("%s %d %s %s %s" % (seg, i + 1, orig, r["prior"], "crc-recomputed-equal" if same else "crc-recomputed-differs"))
            sys.exit(0)
sys.exit(1)
EOF
for mode in stale resealed; do
    if [ ! -d /run/cpushield/journal ]; then
        cs on $SH
        check "7 ($mode): on $SH exits 0" [ "$CS_RC" = 0 ]
    fi
    forged=$(python3 /tmp/cs-forge.py $mode)
    check "7 ($mode): an IRQ record rewritten to etc/shadow: $forged" [ -n "$forged" ]
    [ -n "$forged" ] || continue
    set -- $forged
    SEG=$1 REC=$2 IRQF=$3 PRIOR=$4 SAME=$5
    [ $mode = resealed ] && check "7: the script's checksum of the unaltered record is the journal's own ($SAME)" [ "$SAME" = crc-recomputed-equal ]
    cs off
    check "7 ($mode): off exits 5 ($CS_RC)" [ "$CS_RC" = 5 ]
    check "7 ($mode): off names the record (record $REC of $(basename "$SEG"))" \
        sh -c "grep -q 'record $REC' '$OUT/cs.out' && grep -q '$(basename "$SEG")' '$OUT/cs.out'"
    if [ $mode = stale ]; then
        check "7 (stale): off says it was altered (checksum)" grep -q 'altered after it was written' "$OUT/cs.out"
    else
        check "7 (resealed): off names etc/shadow as outside what a shield changes" \
            sh -c "grep -q 'shadow' '$OUT/cs.out' && grep -q 'outside what a shield changes' '$OUT/cs.out'"
    fi
    check "7 ($mode): /etc/shadow unchanged (content and mtime; it begins $(head -c 12 /etc/shadow | tr -c '[:print:]' '.'))" \
        sh -c "[ '$(sum /etc/shadow)' = '$SHADOW_SUM' ] && [ '$(mtime /etc/shadow)' = '$SHADOW_TIME' ]"
    check "7 ($mode): the rest undone: no shield cgroup left" sh -c '! ls -d /sys/fs/cgroup/cpushield* 2>/dev/null'
    info "7 ($mode): after off /$IRQF reads $(cat /$IRQF) (off did not act on the record; irqbalance may have placed it since), the record's prior value $PRIOR: put back by hand"
    echo "$PRIOR" >/$IRQF 2>/dev/null || info "7: /$IRQF refused $PRIOR"
    rm -rf /run/cpushield/journal.damaged
    # An off that kept the journal (a cpushield before the allow-list:
    # it wrote the record, could not read it back, and kept the journal
    # to try again): the record put back as it was, and off again, so
    # that the cases below run without a shield.
    if [ -d /run/cpushield/journal ]; then
        info "7 ($mode): off kept the journal: the record's path put back ($IRQF), off again"
        python3 /tmp/cs-forge.py restore "$IRQF"
        /job/cpushield off >/dev/null 2>&1
    fi
done
for p in $NAMED; do kill $p 2>/dev/null; done
# shellcheck disable=SC2086
wait $NAMED 2>/dev/null

# --- 3. textfile symlink ----------------------------------------------------
TD=/var/lib/prometheus/node-exporter
PROM_BEFORE=absent; [ -d /var/lib/prometheus ] && PROM_BEFORE=present
mkdir -p $TD; chown $M:$M $TD; chmod 0755 $TD
T=/root/cs-target-textfile; S0=$(sum $T); M0=$(mtime $T)
as_m sh -c "for n in .cpushield.prom.tmp cpushield.prom.tmp .cpushield.prom cpushield.prom.new cpushield.prom; do ln -s $T $TD/\$n; done"
info "3: planted in $TD (owned by $M): $(ls -lA $TD | tail -n +2 | awk '{print $9, $10, $11}' | tr '\n' ';')"
cs metrics --textfile $TD
check "3: metrics --textfile $TD exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "3: the root-only target keeps its content and mtime" sh -c "[ '$(sum $T)' = '$S0' ] && [ '$(mtime $T)' = '$M0' ]"
check "3: $TD/cpushield.prom is a regular file of root's, 0644, no link ($(stat -c '%F %U %a' $TD/cpushield.prom))" \
    sh -c "[ ! -L $TD/cpushield.prom ] && [ '$(stat -c '%F %U %a' $TD/cpushield.prom)' = 'regular file root 644' ]"
check "3: it holds the metrics" grep -q '^cpushield_shield_up ' $TD/cpushield.prom
left=$(ls -A $TD | grep -vx '\.cpushield\.prom\.tmp\|cpushield\.prom\.tmp\|\.cpushield\.prom\|cpushield\.prom\.new\|cpushield\.prom' | tr '\n' ' ')
check "3: no temporary file left (${left:-none})" [ -z "$left" ]
rm -rf $TD; [ $PROM_BEFORE = absent ] && rm -rf /var/lib/prometheus

# --- 4. predictable report directory, and --histfile ------------------------
cd /tmp
T=/root/cs-target-report; S0=$(sum $T); M0=$(mtime $T)
NOW=$(date +%s)
as_m perl -e 'my ($t0, $target) = @ARGV; for my $t ($t0 .. $t0 + 120) { my $d = "/tmp/cpushield-compare-$t"; mkdir $d or next; symlink $target, "$d/$_" for qw(results.json summary.txt histogram.svg histogram.png report.html); }' $NOW $T
info "4: $M made $(find /tmp -maxdepth 1 -name 'cpushield-compare-*' -user $M | wc -l) directories /tmp/cpushield-compare-$NOW..$((NOW + 120)), each with 5 links to $T"
cs compare --cpus 3 --duration 1 --load none --phases idle
check "4: compare from /tmp exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "4: the root-only target keeps its content and mtime" sh -c "[ '$(sum $T)' = '$S0' ] && [ '$(mtime $T)' = '$M0' ]"
R=$(find /tmp -maxdepth 1 -name 'cpushield-compare-*' -user root)
info "4: report directories of root's: ${R:-none}"
check "4: the report is in one new directory of root's ($R)" sh -c "[ \$(echo '$R' | grep -c .) = 1 ] && [ -f '$R/results.json' ] && [ ! -L '$R/results.json' ]"
check "4: compare's output names it" grep -qF "$(basename "$R")" "$OUT/cs.out"
links=$(find /tmp -path '/tmp/cpushield-compare-*' -type l -lname $T | wc -l)
mine=$(find /tmp -maxdepth 1 -name 'cpushield-compare-*' -user $M | wc -l)
check "4: every link $M planted is still there, untouched ($links of $((mine * 5)))" [ "$links" = $((mine * 5)) ]
HD=/home/$M/hist; T=/root/cs-target-hist; S0=$(sum $T); M0=$(mtime $T)
as_m sh -c "mkdir -p $HD && ln -s $T $HD/h"
cs measure --cpus 3 --duration 1 --histfile $HD/h
check "4: measure --histfile into $M's directory exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
check "4: the histfile's planted link is not followed: target unchanged" sh -c "[ '$(sum $T)' = '$S0' ] && [ '$(mtime $T)' = '$M0' ]"
check "4: the histogram is written there ($(stat -c '%F %U' $HD/h 2>&1))" sh -c "[ ! -L $HD/h ] && grep -q '^# Histogram' $HD/h"

# --- 6. label injection through a results file -----------------------------
# compare's own results, in a directory of root's alone
cs compare --cpus 3 --duration 1 --load none --phases idle --out /root/cs-results
check "6: compare --out /root/cs-results exits 0 ($CS_RC)" [ "$CS_RC" = 0 ]
GOOD=/root/cs-results/results.json
EVIL=/home/$M/results.json
python3 - "$GOOD" "$EVIL" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["summary"]["rows"][0]["phase"] = 'idle"} 1\ncpushield_shield_up 1\n#'
json.dump(j, open(sys.argv[2], "w"))
EOF
chown $M:$M "$EVIL"
cs metrics --results "$GOOD"
check "6: control: compare's own results.json is exported (exit $CS_RC, idle's max)" \
    sh -c "[ '$CS_RC' = 0 ] && grep -q 'phase=\"idle\"' '$OUT/cs.out'"
cs metrics --results "$EVIL"
check "6: a results.json whose phase forges a line is refused with exit 2 ($CS_RC)" [ "$CS_RC" = 2 ]
check "6: the refusal names the file" grep -qF "$EVIL" "$OUT/cs.out"
check "6: no forged sample in the exposition" sh -c "! grep -qx 'cpushield_shield_up 1' '$OUT/cs.out'"

# --- undo everything --------------------------------------------------------
cd /
rm -rf /root/cs-results /tmp/cpushield-compare-* /tmp/cs-forge.py /tmp/cs-typed /usr/local/bin/cs-inject /usr/local/bin/cs-probe /root/cs-target-* /root/pwned-*
left=$(ps -u $M -o pid= | tr '\n' ' ')
[ -n "$left" ] && info "$M's processes left: $left" && for p in $left; do kill -9 $p; done
userdel -r $M 2>"$OUT/userdel.err" || info "userdel: $(cat "$OUT/userdel.err")"
check "$M is gone" sh -c "! id $M >/dev/null 2>&1"
rm -rf /run/cpushield/journal.damaged
if [ "$RUN_BEFORE" = absent ]; then rm -rf /run/cpushield; elif [ -d /run/cpushield ]; then chmod "$RUN_BEFORE" /run/cpushield; fi
irqbalance_settle
snap after
snap_equal_after_irqbalance before after "everything as before (threads, IRQs, cgroups, units, irqbalance)"
check "$M's line gone from /etc/shadow" sh -c "! grep -q '^$M:' /etc/shadow"
result
