#!/bin/sh
# summary: the bus audit and the pci probe on the guest's PCI functions (run.sh --machine pc and q35): audit --json agrees with sysfs and with config space read here by od (IDs, Latency Timer, bus master; on q35 port types, LnkCap exit latencies, LnkCtl ASPM); the conventional bus bound recomputed here (pc); measure --probe pci reads back the ISA/LPC bridge's IDs and class; a BAR read of the NIC's MSI-X table (or the kernel's refusal, named); bad input refused with exit 2
# vm: cpus=2 kernels=6.12
. /guest/lib.sh "$1"
has_cpushield || { bad "cpushield binary in the guest"; result; }
D=/sys/bus/pci/devices
[ -d $D ] || skip "no PCI bus in sysfs"
# cfg ADDR OFFSET [BYTES]: an unsigned little-endian value of config space, read here
cfg() { od -An -tu"${3:-1}" -j"$(($2))" -N"${3:-1}" "$D/$1/config" | tr -d ' '; }
hex() { printf '0x%x' "$1"; }

HOST=$(cat $D/0000:00:00.0/device 2>/dev/null)
case $HOST in
    0x1237) MACHINE=pc ;;   # i440FX
    0x29c0) MACHINE=q35 ;;  # Q35 MCH
    *) MACHINE="unknown ($HOST)" ;;
esac
info "machine: $MACHINE; functions: $(ls $D | tr '\n' ' ')"
check "the host bridge is i440FX (pc) or Q35 (q35): $HOST" [ "$MACHINE" = pc -o "$MACHINE" = q35 ]

# ---- audit: read-only; its functions against sysfs and config space
cpushield audit --cpus 1 --window 0 --json >"$OUT/audit.json" 2>"$OUT/audit.err"
check "audit --json exits 0" [ $? -eq 0 ]
cpushield audit --cpus 1 --window 0 >"$OUT/audit.txt" 2>&1
sed -n '/^PCI functions/,$p' "$OUT/audit.txt" | sed 's/^/  | /'
grep -E '^ +(ok|warn|BAD) +pci' -A1 "$OUT/audit.txt" | sed 's/^/  | /'
json_flat "$OUT/audit.json" >"$OUT/audit.flat"
get() { awk -F '\t' -v p="$1" '$1 == p { print $2; exit }' "$OUT/audit.flat"; }
export_files "$OUT/audit.json" "$OUT/audit.txt"

i=0
for dir in $D/*; do
    a=${dir##*/}
    p=.pci.devices[$i]
    [ "$(get $p.address)" = "$a" ] || { bad "function $i of audit is $a: got '$(get $p.address)'"; i=$((i + 1)); continue; }
    vendor=$(cat $dir/vendor); lt=$(cfg $a 0x0d); cmd=$(cfg $a 4 2)
    master=false; [ $((cmd & 4)) -ne 0 ] && master=true
    check "$a: vendor $(get $p.vendor) = sysfs $vendor, Latency Timer $(get $p.config.latency_timer) = config 0x0d $lt, bus master $(get $p.config.bus_master) = command bit 2 ($master)" \
        [ "$(get $p.vendor)" = "$((vendor))" -a "$(get $p.config.latency_timer)" = "$lt" -a "$(get $p.config.bus_master)" = "$master" ]
    # The PCI Express capability, where audit found one: its registers read here.
    capo=$(get $p.config.pcie.cap_offset)
    if [ -n "$capo" ]; then
        flags=$(cfg $a $((capo + 2)) 2); ptype=$(( (flags >> 4) & 15 ))
        check "$a: PCI Express capability 0x$(printf %x "$capo") (ID $(cfg $a "$capo")), port type $(get $p.config.pcie.port_type) = $ptype" \
            [ "$(cfg $a "$capo")" = 16 -a "$(get $p.config.pcie.port_type)" = "$ptype" ]
        if [ "$(get $p.config.pcie.has_link)" = true ]; then
            lnkcap=$(cfg $a $((capo + 12)) 4); lnkctl=$(cfg $a $((capo + 16)) 2)
            l0s=false; l1=false
            [ $((lnkctl & 1)) -ne 0 ] && l0s=true; [ $((lnkctl & 2)) -ne 0 ] && l1=true
            check "$a: LnkCap $(hex "$lnkcap"): L0s exit code $(get $p.config.pcie.l0s_exit.code) = $(( (lnkcap >> 12) & 7 )), L1 exit code $(get $p.config.pcie.l1_exit.code) = $(( (lnkcap >> 15) & 7 )); LnkCtl $(hex "$lnkctl"): ASPM L0s $(get $p.config.pcie.aspm_enabled.l0s) L1 $(get $p.config.pcie.aspm_enabled.l1)" \
                [ "$(get $p.config.pcie.l0s_exit.code)" = $(( (lnkcap >> 12) & 7 )) -a "$(get $p.config.pcie.l1_exit.code)" = $(( (lnkcap >> 15) & 7 )) \
                  -a "$(get $p.config.pcie.aspm_enabled.l0s)" = $l0s -a "$(get $p.config.pcie.aspm_enabled.l1)" = $l1 ]
            info "$a: $(get $p.config.pcie.aspm_support.l0s)/$(get $p.config.pcie.aspm_support.l1) L0s/L1 supported, exit L0s $(get $p.config.pcie.l0s_exit.min_ns)-$(get $p.config.pcie.l0s_exit.max_ns) ns, L1 $(get $p.config.pcie.l1_exit.min_ns)-$(get $p.config.pcie.l1_exit.max_ns) ns; link files l0s_aspm=$(cat $dir/link/l0s_aspm 2>/dev/null || echo -) l1_aspm=$(cat $dir/link/l1_aspm 2>/dev/null || echo -)"
        fi
    fi
    i=$((i + 1))
done
check "audit lists every function of sysfs ($i)" [ -n "$(get .pci.devices[$((i - 1))].address)" -a -z "$(get .pci.devices[$i].address)" ]
policy=$(sed -n 's/.*\[\([a-z]*\)\].*/\1/p' /sys/module/pcie_aspm/parameters/policy 2>/dev/null)
check "ASPM policy: audit '$(get .pci.aspm_policy)', sysfs '${policy:-none}'" [ "$(get .pci.aspm_policy)" = "$policy" ]

# finding ID -> its reason
finding() {
    awk -F '\t' -v id="$1" '$1 ~ /^\.findings\[[0-9]+\]\.id$/ && $2 == id { k = $1; sub(/\.id$/, ".reason", k) }
        k != "" && $1 == k { print $2; exit }' "$OUT/audit.flat"
}
for id in pci.aspm pci.irq pci.numa pci.bound; do
    r=$(finding $id)
    check "finding $id: $r" [ -n "$r" ]
done

# ---- the conventional bus bound, recomputed here from config space
if [ "$MACHINE" = pc ]; then
    total=0; n=0; list=""
    for dir in $D/0000:00:*; do
        a=${dir##*/}
        [ $(( $(cfg $a 4 2) & 4 )) -ne 0 ] || continue
        # the report's mapping: up to the next 32 + 8(n-1), at least 32
        lt=$(cfg $a 0x0d); c=32; [ "$lt" -gt 32 ] && c=$(( 32 + 8 * ((lt - 32 + 7) / 8) ))
        total=$((total + c)); n=$((n + 1)); list="$list $a:LT$lt=$c"
    done
    info "bus 0000:00 bus masters:$list"
    check "bus 0000:00 is conventional ($(get .pci.buses[0].kind)): $(get .pci.buses[0].why)" \
        [ "$(get .pci.buses[0].bus)" = 0000:00 -a "$(get .pci.buses[0].kind)" = conventional ]
    check "its bound, $(get .pci.buses[0].cycles) cycles over $n bus masters, = the sum here, $total cycles" \
        [ "$(get .pci.buses[0].cycles)" = "$total" ]
    us=$(awk -v c="$total" 'BEGIN { printf "%.1f", c / 33 }')
    # the finding's text goes through a file: it quotes the report ("the report's")
    finding pci.bound >/tmp/bound.txt
    check "the finding gives it in µs at 33 MHz: $total cycles = $us µs" grep -q "$total cycles = $us µs" /tmp/bound.txt
    two=$((2 * total + 80)); two_us=$(awk -v c=$two 'BEGIN { printf "%.1f", c / 33 }')
    check "and the report's two-master figure: 2 × $total + 80 = $two cycles = $two_us µs" grep -q "2 × $total + 80 = $two cycles = $two_us µs" /tmp/bound.txt
    note "bus audit (pc): bus 0000:00 $n bus masters, worst case $total bus cycles = $us µs at 33 MHz;$list"
    ide=$(for d in $D/*; do [ "$(cat $d/class)" = 0x010180 ] && echo ${d##*/}; done | head -n1)
    [ -n "$ide" ] && note "bus audit (pc): IDE $ide Latency Timer $(cfg $ide 0x0d), command $(hex "$(cfg $ide 4 2)")"
else
    port=$(awk -F '\t' '$1 ~ /\.config\.pcie\.port_type$/ && $2 == 4 { print $1; exit }' "$OUT/audit.flat")
    check "q35: a PCI Express root port is among the functions (${port:-none})" [ -n "$port" ]
    ep=$(awk -F '\t' '$1 ~ /\.config\.pcie\.port_type$/ && $2 == 0 { sub(/\.config.*/, "", $1); print $1; exit }' "$OUT/audit.flat")
    check "q35: an endpoint with a link behind it ($(get $ep.address))" [ -n "$ep" -a "$(get $ep.config.pcie.has_link)" = true ]
    check "q35: no conventional bus behind the root port ($(get .pci.buses[0].bus) $(get .pci.buses[1].bus))" \
        sh -c "! grep -q '^\.pci\.buses\[[0-9]*\]\.bus	0000:0[1-9]' '$OUT/audit.flat'"
    note "bus audit (q35): $(finding pci.aspm)"
    note "bus audit (q35): $(finding pci.bound)"
    # The kernel's powersave policy (in the guest only, put back below)
    # enables ASPM where both ends of a link support it: audit must name
    # those link ends, as Link Control read here says.
    POL=/sys/module/pcie_aspm/parameters/policy
    if [ -w $POL ] && echo powersave >$POL 2>/dev/null; then
        cpushield audit --cpus 1 --window 0 --json >"$OUT/audit-ps.json" 2>&1
        json_flat "$OUT/audit-ps.json" >"$OUT/audit.flat"
        on=""
        for dir in $D/*; do
            a=${dir##*/}
            capo=$(awk -F '\t' -v a="$a" '$1 ~ /\.address$/ && $2 == a { k = $1; sub(/\.address$/, ".config.pcie.cap_offset", k) } k != "" && $1 == k { print $2; exit }' "$OUT/audit.flat")
            [ -n "$capo" ] || continue
            ctl=$(cfg $a $((capo + 16)) 2)
            [ $((ctl & 3)) -ne 0 ] && on="$on $a"
        done
        r=$(finding pci.aspm)
        info "policy powersave: ASPM on in Link Control of:${on:- none}"
        if [ -n "$on" ]; then
            for a in $on; do
                check "policy powersave: pci.aspm names $a, whose Link Control has ASPM on: $r" sh -c "echo '$r' | grep -q '$a L0s'"
            done
            check "policy powersave: pci.aspm warns, with the exit latency and the policy" sh -c "echo '$r' | grep -q 'L0s exit <64ns' && echo '$r' | grep -q 'policy powersave'"
        else
            check "policy powersave, nothing enabled in Link Control: pci.aspm says off ($r)" sh -c "echo '$r' | grep -q 'ASPM off on all'"
        fi
        note "bus audit (q35, policy powersave): $r"
        echo default >$POL
        check "the ASPM policy is back to default: $(cat $POL)" grep -q '\[default\]' $POL
        json_flat "$OUT/audit.json" >"$OUT/audit.flat"
    fi
fi

# ---- the pci probe: config space of the ISA/LPC bridge (no side effects)
isa=$(for d in $D/*; do [ "$(cat $d/class)" = 0x060100 ] && echo ${d##*/}; done | head -n1)
check "an ISA/LPC bridge (class 0x060100): ${isa:-none}" [ -n "$isa" ]
ids=$(( $(cat $D/$isa/device) << 16 | $(cat $D/$isa/vendor) ))
cpushield measure --probe pci --device "$isa" --cpus 1 --loops 2000 --json >"$OUT/pci.json" 2>"$OUT/pci.err"
check "measure --probe pci --device $isa exits 0 ($(head -c 200 "$OUT/pci.err"))" [ $? -eq 0 ]
json_flat "$OUT/pci.json" >"$OUT/pci.flat"
pget() { awk -F '\t' -v p="$1" '$1 == p { print $2; exit }' "$OUT/pci.flat"; }
r=.results[0]; c=$r.cpus[0]
check "the probe ran: $(pget $r.status), 2000 samples ($(pget $c.stats.samples))" [ "$(pget $r.status)" = ok -a "$(pget $c.stats.samples)" = 2000 ]
check "it read back the IDs sysfs gives, $(hex $ids), at every read: $(hex "$(pget $c.device.first_value)"), $(pget $c.device.changed) differed" \
    [ "$(pget $c.device.first_value)" = "$ids" -a "$(pget $c.device.changed)" = 0 -a "$(pget $c.device.short_reads)" = 0 ]
cpushield measure --probe pci --device "$isa" --device-offset 0x8 --cpus 1 --loops 2000 >"$OUT/pci.txt" 2>&1
check "offset 0x8 (revision, class) reads back $(hex "$(cfg $isa 8 4)")" grep -q "$(printf '0x%08x' "$(cfg $isa 8 4)") on every read" "$OUT/pci.txt"
sed 's/^/  | /' "$OUT/pci.txt" | sed -n '4,12p'
note "pci probe ($MACHINE): config space 0x00 of $isa, 2000 reads on CPU 1: min $(pget $c.stats.min_ns) ns, p50 $(pget $c.stats.percentiles[0].value_ns) ns, p99 $(pget $c.stats.percentiles[2].value_ns) ns, max $(pget $c.stats.max_ns) ns (emulated)"
export_files "$OUT/pci.json" "$OUT/pci.txt"

# ---- a BAR register only when named: the NIC's MSI-X table (BAR 1, entry
# 0's message address: reading it has no side effect) through resource1
nic=$(for d in $D/*; do [ "$(cat $d/class)" = 0x020000 ] && echo ${d##*/}; done | head -n1)
if [ -n "$nic" ] && [ -e $D/$nic/resource1 ]; then
    cpushield measure --probe pci --device "$nic" --device-bar 1 --device-offset 0 --cpus 1 --loops 500 --json >"$OUT/bar.json" 2>"$OUT/bar.err"
    rc=$?
    if [ $rc -eq 0 ]; then
        v=$(json_flat "$OUT/bar.json" | awk -F '\t' '$1 ~ /\.device\.first_value$/ { print $2; exit }')
        check "BAR 1 of $nic: MSI-X entry 0's address $(hex "${v:-0}") is in the x86 MSI window 0xfee00000" [ $(( ${v:-0} >> 20 )) -eq $((0xfee)) ]
        bget() { json_flat "$OUT/bar.json" | awk -F '\t' -v p="$1" '$1 == p { print $2; exit }'; }
        note "pci probe ($MACHINE): BAR 1 0x0 of $nic (MSI-X table), 500 reads on CPU 1: min $(bget .results[0].cpus[0].stats.min_ns) ns, p50 $(bget .results[0].cpus[0].stats.percentiles[0].value_ns) ns, p99 $(bget .results[0].cpus[0].stats.percentiles[2].value_ns) ns, max $(bget .results[0].cpus[0].stats.max_ns) ns (emulated)"
    else
        check "BAR 1 of $nic could not be mapped and the error names the file: $(head -c 300 "$OUT/bar.err")" grep -q "resource1" "$OUT/bar.err"
        note "pci probe ($MACHINE): the kernel refused to map BAR 1 of $nic held by its driver: $(head -c 200 "$OUT/bar.err")"
    fi
fi

# ---- bad input: exit 2, the input named, nothing measured
refused() {  # refused NEEDLE ARGS...
    local needle=$1; shift
    cpushield measure --probe pci --cpus 1 --loops 10 "$@" >"$OUT/bad.out" 2>"$OUT/bad.err"
    local rc=$?
    check "measure --probe pci $*: exit $rc (2), '$needle' in: $(head -c 160 "$OUT/bad.err")" \
        sh -c "[ $rc -eq 2 ] && [ ! -s '$OUT/bad.out' ] && grep -q -- '$needle' '$OUT/bad.err'"
}
refused "DDDD:BB:DD.F" --device 00:1f
refused "under /sys/bus/pci/devices: 0000:00:00.0" --device 0000:00:1e.7
refused "0x0 to 0x" --device "$isa" --device-offset 0x1000
refused "a multiple of 4" --device "$isa" --device-offset 2
iobar=""
for d in $D/*; do
    n=0
    while read -r start end flags; do
        [ $((flags & 0x100)) -ne 0 ] && [ $((end)) -gt $((start)) ] && { iobar="${d##*/} $n"; break; }
        n=$((n + 1)); [ $n -gt 5 ] && break
    done <"$d/resource"
    [ -n "$iobar" ] && break
done
if [ -n "$iobar" ]; then
    set -- $iobar
    refused "not memory" --device "$1" --device-bar "$2"
fi
result
