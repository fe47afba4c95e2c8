# Build the guest's initramfs (sourced).  Two newc archives, concatenated:
#   base (cached per kernel): busybox, cyclictest, stress-ng and the shared
#        libraries ldd lists, the virtio modules of that kernel;
#   overlay (every run): /init, tests/vm/guest, the scenarios, the cpushield
#        binary under test.
# shellcheck shell=bash

GUEST_TOOLS="/usr/bin/cyclictest /usr/bin/stress-ng /usr/bin/chrt"  # chrt: util-linux (busybox has none)

copy_with_libs() { # copy_with_libs ROOT BINARY...
    local root=$1 b l
    shift
    for b in "$@"; do
        [ -x "$b" ] || die "$b not found (apt-get install rt-tests stress-ng)"
        mkdir -p "$root$(dirname "$b")"
        cp -L "$b" "$root$b"
        for l in $(ldd "$b" 2>/dev/null | awk '/=> \// {print $3} /^[ \t]*\/[^ ]*ld-linux/ {print $1}'); do
            [ -e "$root$l" ] && continue
            mkdir -p "$root$(dirname "$l")"
            cp -L "$l" "$root$l"
        done
    done
}

mkcpio() { # mkcpio DIR OUT (written whole, then renamed: two runs that
    # build the same cached archive at once each rename a complete one)
    (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | busybox cpio -o -H newc -R 0:0 2>/dev/null) >"$2.tmp.$$" \
        && mv -f "$2.tmp.$$" "$2"
}

# base_initramfs KERNEL_DIR -> path of the cached base archive
base_initramfs() {
    local kdir=$1 out=$1/base.cpio stamp root tools_id
    tools_id=$(sha256sum /usr/bin/busybox $GUEST_TOOLS "$VM_DIR/lib/initramfs.sh" | sha256sum | cut -c1-16)
    stamp=$kdir/base.cpio.id
    if [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$tools_id" ]; then
        printf '%s\n' "$out"; return 0
    fi
    log "building base initramfs for $(cat "$kdir/release")"
    root=$(mktemp -d "$WORK_DIR/base.XXXXXX")
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,lib64,lib/modules,proc,sys,dev,run,tmp,root,etc,results,mnt}
    cp /usr/bin/busybox "$root/bin/busybox"
    ln -s busybox "$root/bin/sh"
    copy_with_libs "$root" $GUEST_TOOLS
    cp "$kdir"/modules/*.ko "$kdir/modules/load-order" "$root/lib/modules/" 2>/dev/null || true
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    mkcpio "$root" "$out"
    echo "$tools_id" >"$stamp"
    rm -rf "$root"
    printf '%s\n' "$out"
}

# overlay_initramfs BINARY OUT: the scenarios, guest scripts and the binary;
# also the test-tool examples (idle_tasks for the scale scenario,
# check_compare_dir for the compare scenarios, interfere for 19-explain)
# when they were built beside it
overlay_initramfs() {
    local bin=$1 out=$2 root tool
    root=$(mktemp -d "$WORK_DIR/overlay.XXXXXX")
    mkdir -p "$root/usr/local/bin" "$root/guest" "$root/scenarios" "$root/etc"
    cp "$VM_DIR/guest/init" "$root/init"
    chmod 755 "$root/init"
    cp "$VM_DIR"/guest/*.sh "$root/guest/"
    cp "$VM_DIR"/scenarios/*.sh "$VM_DIR"/probes/*.sh "$root/scenarios/"
    cp "$VM_DIR/guest/motd" "$root/etc/motd" 2>/dev/null || true
    if [ -n "$bin" ]; then
        # a stripped copy: smaller initrd (the binary keeps its debug info)
        strip -o "$root/usr/local/bin/cpushield" "$bin" 2>/dev/null || cp "$bin" "$root/usr/local/bin/cpushield"
        chmod 755 "$root/usr/local/bin/cpushield"
        # the cpushield of journal version 1, for 26-journal-v1
        # (tests/vm/build-journal-v1.sh DIR/previous)
        if [ -x "$(dirname "$bin")/previous/cpushield-journal-v1" ]; then
            strip -o "$root/usr/local/bin/cpushield-journal-v1" "$(dirname "$bin")/previous/cpushield-journal-v1" 2>/dev/null \
                || cp "$(dirname "$bin")/previous/cpushield-journal-v1" "$root/usr/local/bin/"
        fi
        for tool in idle_tasks check_compare_dir interfere; do
            local built
            built=$(dirname "$bin")/$tool
            if [ -x "$built" ]; then
                strip -o "$root/usr/local/bin/$tool" "$built" 2>/dev/null || cp "$built" "$root/usr/local/bin/$tool"
            fi
        done
    fi
    # stalld, for the guard's stalld engine (probes/stalld-guard.sh): not
    # packaged by Debian, so only when given, a static build
    # (make USE_BPF=0 static in its source tree)
    if [ -n "${CPUSHIELD_VM_STALLD:-}" ]; then
        [ -x "$CPUSHIELD_VM_STALLD" ] || die "CPUSHIELD_VM_STALLD=$CPUSHIELD_VM_STALLD is not an executable"
        mkdir -p "$root/usr/sbin"
        cp "$CPUSHIELD_VM_STALLD" "$root/usr/sbin/stalld"
    fi
    mkcpio "$root" "$out"
    rm -rf "$root"
}
