# Fetch and unpack a Debian kernel with a private apt configuration (sourced).
#
# The host's apt configuration is never changed: a private sources list
# (the host's own Debian mirrors, plus bookworm-backports for 6.12) and
# private lists/cache live under $CACHE_DIR/apt.  Kernels are unpacked with
# dpkg -x, never installed.
# shellcheck shell=bash

APT_DIR=$CACHE_DIR/apt

apt_opts() {
    printf '%s\n' \
        -o "Dir::Etc::SourceList=$APT_DIR/etc/sources.list" \
        -o "Dir::Etc::SourceParts=$APT_DIR/etc/sources.list.d" \
        -o "Dir::Etc::Preferences=$APT_DIR/etc/preferences" \
        -o "Dir::Etc::PreferencesParts=$APT_DIR/etc/preferences.d" \
        -o "Dir::State::Lists=$APT_DIR/lists" \
        -o "Dir::State::Status=$APT_DIR/status" \
        -o "Dir::Cache=$APT_DIR" \
        -o "APT::Sandbox::User=root" \
        -o "Debug::NoLocking=1" \
        -o "Acquire::Retries=3"
}

# Private sources: every Debian repository the host already uses (same
# mirrors, no address written here), and bookworm-backports beside bookworm.
apt_setup() {
    mkdir -p "$APT_DIR"/etc/sources.list.d "$APT_DIR"/etc/preferences.d \
        "$APT_DIR"/lists/partial "$APT_DIR"/archives/partial
    touch "$APT_DIR/status"
    local srcs uri
    srcs=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null \
        | awk '$2 ~ /^bookworm/ {print "deb " $1 " " $2 " main"}' | sort -u)
    uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null \
        | awk '$2 == "bookworm" {print $1; exit}')
    [ -n "$uri" ] || die "no bookworm repository in the host's apt sources (run apt-get update once)"
    # trixie-backports carries Debian's 7.x kernels (Debian 14's series);
    # only its kernel is taken, never installed.
    printf '%s\ndeb %s bookworm-backports main\ndeb %s trixie-backports main\n' "$srcs" "$uri" "$uri" \
        | sort -u >"$APT_DIR/etc/sources.list.new"
    if ! cmp -s "$APT_DIR/etc/sources.list.new" "$APT_DIR/etc/sources.list"; then
        mv "$APT_DIR/etc/sources.list.new" "$APT_DIR/etc/sources.list"
        rm -f "$APT_DIR/lists/.stamp"
    else
        rm -f "$APT_DIR/etc/sources.list.new"
    fi
    # Refresh the private lists at most once a day (or when forced).
    if [ -n "${VM_REFRESH:-}" ] || [ -z "$(find "$APT_DIR/lists/.stamp" -mmin -1440 2>/dev/null)" ]; then
        log "apt-get update (private lists)"
        # shellcheck disable=SC2046
        apt-get $(apt_opts) -q update >"$APT_DIR/update.log" 2>&1 \
            || { cat "$APT_DIR/update.log" >&2; die "apt-get update failed"; }
        touch "$APT_DIR/lists/.stamp"
    fi
}

# kernel_pkg 6.1|6.12|7 -> versioned package name, e.g. linux-image-6.1.0-37-cloud-amd64
kernel_pkg() {
    local want=$1 meta=linux-image-cloud-amd64 pkg
    case $want in
        6.1) meta="$meta/bookworm" ;;
        6.12) meta="$meta/bookworm-backports" ;;
        7) meta="$meta/trixie-backports" ;;
        *) die "unknown kernel '$want' (6.1, 6.12 or 7)" ;;
    esac
    if [ "$want" = 6.1 ]; then
        # Newest 6.1 of bookworm, its updates and security: the metapackage's
        # candidate outside backports.
        # shellcheck disable=SC2046
        pkg=$(apt-cache $(apt_opts) depends linux-image-cloud-amd64 2>/dev/null \
            | awk '/Depends: linux-image-6\.1\./ {print $2; exit}')
    else
        # shellcheck disable=SC2046
        pkg=$(apt-cache $(apt_opts) depends "$meta" 2>/dev/null \
            | awk -v v="$want" 'index($0, "Depends: linux-image-" v ".") {print $2; exit}')
    fi
    [ -n "$pkg" ] || die "cannot resolve the $want cloud kernel package"
    printf '%s\n' "$pkg"
}

# cached_deb PKG -> the package's .deb under $CACHE_DIR/debs, downloaded once.
cached_deb() {
    local pkg=$1 deb
    mkdir -p "$CACHE_DIR/debs"
    deb=$(ls "$CACHE_DIR/debs/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
        # shellcheck disable=SC2046
        (cd "$CACHE_DIR/debs" && apt-get $(apt_opts) -q download "$pkg" >/dev/null) \
            || die "apt-get download $pkg failed"
        deb=$(ls "$CACHE_DIR/debs/${pkg}_"*.deb | head -n1)
    fi
    printf '%s\n' "$deb"
}

# fetch_kernel 6.1|6.12|7 -> prints the unpacked kernel directory.
# Layout: $CACHE_DIR/kernels/<pkg>/{vmlinuz,release,modules/*.ko,modules/load-order}
fetch_kernel() {
    local want=$1 pkg dir deb rel
    # Offline / warm path: reuse the last resolved package if unpacked.
    if [ -z "${VM_REFRESH:-}" ] && [ -s "$CACHE_DIR/kernels/$want.current" ]; then
        pkg=$(cat "$CACHE_DIR/kernels/$want.current")
        if [ -f "$CACHE_DIR/kernels/$pkg/.done" ]; then
            printf '%s\n' "$CACHE_DIR/kernels/$pkg"
            return 0
        fi
    fi
    apt_setup
    pkg=$(kernel_pkg "$want")
    dir=$CACHE_DIR/kernels/$pkg
    if [ ! -f "$dir/.done" ]; then
        log "fetching $pkg"
        deb=$(cached_deb "$pkg")
        rm -rf "$dir" "$dir.tmp"
        mkdir -p "$dir.tmp/x"
        dpkg -x "$deb" "$dir.tmp/x"
        # Since 7.x Debian splits the kernel: the image package depends on
        # linux-base-REL, linux-binary-REL and linux-modules-REL, which
        # hold vmlinuz, its config and the modules (virtio_net, virtio_blk).
        local part
        # shellcheck disable=SC2046
        for part in $(apt-cache $(apt_opts) depends "$pkg" 2>/dev/null \
                | awk '/Depends: linux-(base|binary|modules)-[0-9]/ {print $2}'); do
            dpkg -x "$(cached_deb "$part")" "$dir.tmp/x"
        done
        # Packages of Debian 13 and later keep modules under /usr/lib.
        local mods=$dir.tmp/x/lib/modules
        [ -d "$mods" ] || mods=$dir.tmp/x/usr/lib/modules
        rel=$(ls "$mods" 2>/dev/null | head -n1)
        [ -n "$rel" ] || die "no modules directory in $deb"
        if [ -f "$dir.tmp/x/boot/vmlinuz-$rel" ]; then
            cp "$dir.tmp/x/boot/vmlinuz-$rel" "$dir.tmp/vmlinuz"
            cp "$dir.tmp/x/boot/config-$rel" "$dir.tmp/config"
        else
            cp "$mods/$rel/vmlinuz" "$dir.tmp/vmlinuz" || die "no vmlinuz in $deb"
            cp "$mods/$rel/config" "$dir.tmp/config" || die "no config in $deb"
        fi
        echo "$rel" >"$dir.tmp/release"
        prepare_modules "$mods/$rel" "$dir.tmp/modules"
        rm -rf "$dir.tmp/x"
        touch "$dir.tmp/.done"
        mv "$dir.tmp" "$dir"
    fi
    mkdir -p "$CACHE_DIR/kernels"
    echo "$pkg" >"$CACHE_DIR/kernels/$want.current"
    printf '%s\n' "$dir"
}

# Copy the virtio modules the guest needs (and their dependencies, found
# with modinfo since the package carries no modules.dep), decompressed,
# and write the order to load them in (dependencies first).
VM_MODULES="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk failover net_failover virtio_net"
prepare_modules() {
    local src=$1 out=$2 m f deps
    mkdir -p "$out"
    : >"$out/load-order"
    declare -A seen=()
    _add_module() {
        local name=$1 path d
        [ -n "${seen[$name]:-}" ] && return 0
        seen[$name]=1
        path=$(find "$src/kernel" \( -name "$name.ko" -o -name "$name.ko.xz" -o -name "$name.ko.zst" -o -name "$name.ko.gz" \) | head -n1)
        if [ -z "$path" ]; then
            # built in (or absent): nothing to load
            return 0
        fi
        case $path in
            *.xz) xz -dc "$path" >"$out/$name.ko" ;;
            *.zst) zstd -qdc "$path" >"$out/$name.ko" ;;
            *.gz) gzip -dc "$path" >"$out/$name.ko" ;;
            *) cp "$path" "$out/$name.ko" ;;
        esac
        deps=$(busybox modinfo -F depends "$out/$name.ko" 2>/dev/null | tr ',' ' ')
        for d in $deps; do _add_module "${d//-/_}"; done
        echo "$name" >>"$out/load-order"
    }
    for m in $VM_MODULES; do _add_module "$m"; done
}
