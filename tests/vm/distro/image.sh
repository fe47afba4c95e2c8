#!/usr/bin/env bash
# Builds (once, cached) a Debian system booted by systemd for the test bed:
# the distribution as users run it, with systemd, udev, dbus, irqbalance and
# tuned enabled as Debian ships them, plus rt-tests and stress-ng.
#   tests/vm/distro/image.sh [--grub | --uefi KIND] SUITE [EXTRA]   (bookworm | trixie | trixie-rt | trixie-k8s | trixie-crio | trixie-k8s2 | forky)
# trixie-rt: Debian 13 with its PREEMPT_RT kernel (linux-image-rt-amd64)
# in place of the cloud kernel.
# trixie-k8s: Debian 13 as a Kubernetes node (issue #60): containerd 1.7
# (Debian's; CRI with the systemd cgroup driver, NRI on), kubelet and
# crictl built from Go modules by tests/vm/k8s/build-kubelet.sh (called
# here, cached), kubelet standalone with the static CPU manager, busybox
# and pause OCI images imported at boot (tests/vm/k8s/customize.sh).
# trixie-crio: the same node with CRI-O 1.34 in place of containerd (built
# by tests/vm/k8s/build-crio.sh, called here, cached; Debian's runc (the
# default runtime), crun and conmon; systemd cgroup manager, NRI on, the
# high-performance annotations allowed on the runtimes), the images copied
# into containers-storage at boot with skopeo (tests/vm/k8s/crio/customize.sh).
# trixie-k8s2: the trixie-k8s node with containerd 2.x in place of Debian's
# containerd 1.7 (built by tests/vm/k8s/build-containerd2.sh, called here,
# cached; containerd's own unit, a version 3 configuration: CRI with the
# systemd cgroup driver, the local pause image pinned as the sandbox, NRI on;
# Debian's runc), the rest trixie-k8s's (tests/vm/k8s/containerd2/customize.sh).
# EXTRA: more packages, comma-separated (the scale benchmark's tuna, cpuset
# and strace): a separate cached image, the test bed's own stays as it is.
# Prints the directory holding root.img (ext4, made with mke2fs -d: nothing
# is mounted on this machine), vmlinuz and initrd.img. Needs root (mmdebstrap
# in root mode) and Debian's package mirror; nothing on this machine changes
# beyond the cache directory.
# --grub: a disk that boots through SeaBIOS and GRUB, cached apart
# (SUITE-grub-HASH): root.img has an MBR partition table (sfdisk on the
# file) and the ext4 in partition 1 (written at its offset with dd);
# grub-pc is in the image, and the guest installs GRUB itself: one boot
# with QEMU's -kernel and root=/dev/vda1 runs grub-install /dev/vda and
# update-grub (grub-install.log), a second boot from the disk checks it
# (grub-check.log). GRUB waits 0 s and both GRUB and the kernel use the
# serial console; /etc/default/grub.d is left empty.
# --uefi KIND (sdboot | uki | grub-efi; Debian 13 and later): a disk that
# boots through UEFI (OVMF, from the host's package ovmf), cached apart
# (SUITE-uefi-KIND-HASH): root.img has a GPT (sfdisk on the file), an EFI
# System Partition in partition 1 (FAT32, 300 MiB, made here with
# mkfs.vfat on a file and written at its offset with dd), mounted at
# /boot/efi in the guest, and the ext4 root in partition 2. OVMF_VARS.fd
# next to it is the image's NVRAM (a copy of OVMF_VARS_4M.fd the install
# boot wrote to); every boot after that takes a copy of its own. The guest
# installs its loader itself: one boot with QEMU's -kernel under OVMF (so
# efivarfs works) and root=/dev/vda2 (uefi-install.log), then a boot from
# the disk checks it (uefi-check.log):
#   sdboot    bootctl install and kernel-install add: a BLS type #1 entry
#             (loader/entries/) booted by systemd-boot
#   uki       the same with /etc/kernel/install.conf layout=uki and
#             uki_generator=ukify: a UKI in EFI/Linux/ booted by systemd-boot
#   grub-efi  grub-install --target=x86_64-efi --removable (EFI/BOOT/BOOTX64.EFI,
#             no NVRAM entry) and grub-mkconfig -o /boot/grub/grub.cfg
# Both systemd-boot kinds wait 0 s (loader.conf "timeout 0") and take the
# entry's options from /proc/cmdline of the install boot (console=ttyS0):
# there is no /etc/kernel/cmdline. GRUB as with --grub.
set -euo pipefail
. "$(dirname "$0")/../lib/common.sh"
GRUB=0
UEFI=""
[ "${1:-}" = --grub ] && { GRUB=1; shift; }
if [ "${1:-}" = --uefi ]; then
    UEFI=${2:?usage: image.sh --uefi sdboot|uki|grub-efi SUITE [EXTRA]}; shift 2
    case $UEFI in sdboot|uki|grub-efi) ;; *) die "--uefi $UEFI: sdboot, uki or grub-efi" ;; esac
fi
SUITE=${1:?usage: image.sh [--grub | --uefi KIND] bookworm|trixie|trixie-rt|trixie-k8s|trixie-crio|trixie-k8s2|forky [EXTRA]}
MMOPTS=()
DIST=$SUITE
KERNEL_PKG=linux-image-cloud-amd64
case $SUITE in
    bookworm|trixie) ;;
    trixie-rt) DIST=trixie; KERNEL_PKG=linux-image-rt-amd64 ;;
    trixie-k8s|trixie-crio|trixie-k8s2) DIST=trixie ;;
    # Debian 14 (testing): the mirror's Release file may be past its Valid-Until
    forky) MMOPTS=(--aptopt='Acquire::Check-Valid-Until "false"') ;;
    *) die "suite '$SUITE': bookworm, trixie, trixie-rt, trixie-k8s, trixie-crio, trixie-k8s2 or forky" ;;
esac
need_cmd mmdebstrap mke2fs
PKGS=systemd-sysv,udev,dbus,kmod,procps,util-linux,iproute2,irqbalance,tuned,rt-tests,stress-ng,python3,initramfs-tools,$KERNEL_PKG,man-db
[ $GRUB = 1 ] && PKGS=$PKGS,grub-pc
# trixie-k8s: the node's packages, and the hook that puts kubelet, its
# configuration and the OCI images in (tests/vm/k8s/customize.sh)
K8S_HOOK=()
if [ "$SUITE" = trixie-k8s ]; then
    # strace: 21-k8s-nri kills the plugin at a chosen write (its fault
    # injection), from outside the plugin
    PKGS=$PKGS,containerd,runc,busybox-static,strace
    K8S_BIN=$(bash "$VM_DIR/k8s/build-kubelet.sh" | tail -n1)
    [ -x "$K8S_BIN/kubelet" ] || die "no kubelet (tests/vm/k8s/build-kubelet.sh)"
    K8S_HOOK=(--customize-hook="bash '$VM_DIR/k8s/customize.sh' \"\$1\" '$K8S_BIN'")
fi
# trixie-crio: CRI-O (built here, cached) with Debian's runc, crun and conmon, and
# skopeo to put the images into containers-storage at boot; the rest as
# trixie-k8s (tests/vm/k8s/crio/customize.sh)
if [ "$SUITE" = trixie-crio ]; then
    PKGS=$PKGS,runc,crun,conmon,skopeo,busybox-static,strace
    K8S_BIN=$(bash "$VM_DIR/k8s/build-kubelet.sh" | tail -n1)
    [ -x "$K8S_BIN/kubelet" ] || die "no kubelet (tests/vm/k8s/build-kubelet.sh)"
    bash "$VM_DIR/k8s/build-crio.sh" >/dev/null
    [ -x "$K8S_BIN/crio" ] && [ -x "$K8S_BIN/pinns" ] || die "no crio (tests/vm/k8s/build-crio.sh)"
    K8S_HOOK=(--customize-hook="bash '$VM_DIR/k8s/crio/customize.sh' \"\$1\" '$K8S_BIN'")
fi
# trixie-k8s2: containerd 2.x (built here, cached) with Debian's runc in
# place of Debian's containerd package; the rest as trixie-k8s
# (tests/vm/k8s/containerd2/customize.sh)
if [ "$SUITE" = trixie-k8s2 ]; then
    PKGS=$PKGS,runc,busybox-static,strace
    K8S_BIN=$(bash "$VM_DIR/k8s/build-kubelet.sh" | tail -n1)
    [ -x "$K8S_BIN/kubelet" ] || die "no kubelet (tests/vm/k8s/build-kubelet.sh)"
    CD2_BIN=$(bash "$VM_DIR/k8s/build-containerd2.sh" | tail -n1)
    [ -x "$CD2_BIN/containerd" ] && [ -x "$CD2_BIN/containerd-shim-runc-v2" ] && [ -x "$CD2_BIN/ctr" ] \
        || die "no containerd 2 (tests/vm/k8s/build-containerd2.sh)"
    K8S_HOOK=(--customize-hook="bash '$VM_DIR/k8s/containerd2/customize.sh' \"\$1\" '$K8S_BIN' '$CD2_BIN'")
fi
case $UEFI in
    sdboot) PKGS=$PKGS,systemd-boot,systemd-boot-efi,dosfstools,efibootmgr ;;
    uki) PKGS=$PKGS,systemd-boot,systemd-boot-efi,systemd-ukify,dosfstools,efibootmgr ;;
    grub-efi) PKGS=$PKGS,grub-efi-amd64,dosfstools,efibootmgr ;;
esac
if [ -n "$UEFI" ]; then
    [ "$SUITE" = bookworm ] && die "--uefi: Debian 13 (trixie) or later (systemd-ukify, GRUB 2.12)"
    [ $GRUB = 1 ] && die "--grub and --uefi: one or the other"
fi
EXTRA=${2:-}
[ -n "$EXTRA" ] && PKGS=$PKGS,$EXTRA
FSTAB_HOOK='echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$1/etc/fstab"'
[ $GRUB = 1 ] && FSTAB_HOOK='echo "/dev/vda1 / ext4 rw,errors=remount-ro 0 1" >"$1/etc/fstab"'
# --uefi: the ESP at /boot/efi, where Debian's installer puts it (and
# grub-install looks by default); bootctl and kernel-install search /efi,
# /boot and /boot/efi, and /boot stays on the root file system where
# Debian's kernel packages write vmlinuz and initrd.img. umask=0077: bootctl
# warns about a world-readable random seed otherwise.
[ -n "$UEFI" ] && FSTAB_HOOK='mkdir -p "$1/boot/efi"; printf "%s\n" "/dev/vda2 / ext4 rw,errors=remount-ro 0 1" "/dev/vda1 /boot/efi vfat umask=0077 0 2" >"$1/etc/fstab"'
# grub-pc's postinst runs in a chroot on this machine: it must install GRUB
# nowhere (no install devices, and that answer accepted)
PRESEED=()
[ $GRUB = 1 ] && PRESEED=(--essential-hook='printf "%s\n" "grub-pc grub-pc/install_devices multiselect" "grub-pc grub-pc/install_devices_empty boolean true" | chroot "$1" debconf-set-selections')
# The unit that runs a job: the job disk (/dev/vdb) holds a tar with run.sh;
# its results go as a tar onto /dev/vdc; then the guest powers off.
read -r -d '' UNIT <<'UNIT_EOF' || true
[Unit]
Description=cpushield test-bed job
After=multi-user.target irqbalance.service tuned.service
Wants=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/cpushield-job
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT_EOF
read -r -d '' JOB <<'JOB_EOF' || true
#!/bin/sh
# Runs the test-bed job from /dev/vdb, results to /dev/vdc, then powers off.
mkdir -p /job /results
echo "CPUSHIELD-BOOT: at $(cut -d' ' -f1 /proc/uptime)s kernel $(uname -r) systemd $(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') cgroup $(stat -fc %T /sys/fs/cgroup)"
if tar -xf /dev/vdb -C /job 2>/tmp/job.err; then
    sh /job/run.sh >/dev/console 2>&1
else
    echo "CPUSHIELD-WARN: no job on /dev/vdb: $(cat /tmp/job.err)"
fi
tar -cf /dev/vdc -C /results . 2>/dev/null
sync
echo "CPUSHIELD-DONE"
systemctl poweroff --no-block
JOB_EOF
# --grub: the job of the image's first boot (QEMU -kernel, root=/dev/vda1):
# GRUB quick and on the serial console, installed onto the disk, and its
# grub.cfg generated by the guest's own update-grub
read -r -d '' GRUB_SETUP <<'GRUB_SETUP_EOF' || true
#!/bin/sh
set -e
sed -i -e '/^#\{0,1\}GRUB_TIMEOUT=/d' -e '/^#\{0,1\}GRUB_TERMINAL=/d' -e '/^#\{0,1\}GRUB_SERIAL_COMMAND=/d' \
    -e '/^#\{0,1\}GRUB_CMDLINE_LINUX=/d' -e '/^#\{0,1\}GRUB_CMDLINE_LINUX_DEFAULT=/d' /etc/default/grub
cat >>/etc/default/grub <<'DEFAULTS_EOF'
# the cpushield test bed: no menu wait; GRUB and the kernel on the serial console
GRUB_TIMEOUT=0
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_CMDLINE_LINUX="console=ttyS0 panic=-1"
GRUB_CMDLINE_LINUX_DEFAULT="quiet loglevel=3 systemd.show_status=0"
DEFAULTS_EOF
grub-install --target=i386-pc /dev/vda
update-grub
echo "CPUSHIELD-GRUB: grub.cfg sha256 $(sha256sum /boot/grub/grub.cfg | cut -c1-16), kernel lines:"
grep '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg
echo "CPUSHIELD-GRUB: /etc/default/grub.d: $(ls -A /etc/default/grub.d 2>/dev/null | tr '\n' ' ')"
rm -rf /job/* /results/*
echo CPUSHIELD-GRUB-INSTALLED
GRUB_SETUP_EOF
# --uefi: the job of the image's first boot (QEMU -kernel under OVMF,
# root=/dev/vda2, efivarfs mounted by systemd): the guest installs its own
# loader onto the ESP at /boot/efi (run.sh puts KIND=... before this)
read -r -d '' UEFI_SETUP <<'UEFI_SETUP_EOF' || true
set -e
v=$(uname -r)
# ev NAME: a Boot Loader Interface variable (vendor GUID 4a67b082-...) as text
# (efivarfs files cannot seek: through cat)
ev() { f=/sys/firmware/efi/efivars/$1-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f; [ -f "$f" ] && cat "$f" | tail -c +5 | iconv -f UTF-16LE -t UTF-8 | tr -d '\000'; true; }
printf 'CPUSHIELD-UEFI: %s\n' "$KIND, kernel $v, /proc/cmdline: $(cat /proc/cmdline)"
findmnt /sys/firmware/efi/efivars >/dev/null || { echo "CPUSHIELD-UEFI: no efivarfs"; exit 1; }
findmnt /boot/efi
case $KIND in
sdboot|uki)
    # uki: kernel-install builds a UKI with ukify and copies it to
    # ESP/EFI/Linux/ (no type #1 entry); sdboot: no install.conf, the
    # layout is found (bls: loader/entries.srel says type1 after bootctl install)
    [ "$KIND" = uki ] && printf '%s\n' layout=uki uki_generator=ukify >/etc/kernel/install.conf
    bootctl install
    echo 'timeout 0' >>/boot/efi/loader/loader.conf
    kernel-install --verbose add "$v" "/boot/vmlinuz-$v" "/boot/initrd.img-$v"
    echo "CPUSHIELD-UEFI: kernel-install inspect:"; kernel-install inspect || true
    echo "CPUSHIELD-UEFI: bootctl list:"; bootctl list --no-pager || true
    echo "CPUSHIELD-UEFI: loader.conf: $(tr '\n' '|' </boot/efi/loader/loader.conf)"
    for e in /boot/efi/loader/entries/*.conf; do [ -f "$e" ] && { echo "CPUSHIELD-UEFI: $e:"; cat "$e"; }; done
    ;;
grub-efi)
    sed -i -e '/^#\{0,1\}GRUB_TIMEOUT=/d' -e '/^#\{0,1\}GRUB_TERMINAL=/d' -e '/^#\{0,1\}GRUB_SERIAL_COMMAND=/d' \
        -e '/^#\{0,1\}GRUB_CMDLINE_LINUX=/d' -e '/^#\{0,1\}GRUB_CMDLINE_LINUX_DEFAULT=/d' /etc/default/grub
    cat >>/etc/default/grub <<'DEFAULTS_EOF'
# the cpushield test bed: no menu wait; GRUB and the kernel on the serial console
GRUB_TIMEOUT=0
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_CMDLINE_LINUX="console=ttyS0 panic=-1"
GRUB_CMDLINE_LINUX_DEFAULT="quiet loglevel=3 systemd.show_status=0"
DEFAULTS_EOF
    # the fallback path EFI/BOOT/BOOTX64.EFI, no NVRAM boot entry
    grub-install --target=x86_64-efi --efi-directory=/boot/efi --removable --no-nvram
    grub-mkconfig -o /boot/grub/grub.cfg
    echo "CPUSHIELD-UEFI: grub.cfg sha256 $(sha256sum /boot/grub/grub.cfg | cut -c1-16), kernel lines:"
    grep '^[[:space:]]*linux[[:space:]]' /boot/grub/grub.cfg
    echo "CPUSHIELD-UEFI: bli in grub.cfg: $(grep -n 'bli' /boot/grub/grub.cfg | tr '\n' ' ')"
    ;;
esac
echo "CPUSHIELD-UEFI: ESP files:"; (cd /boot/efi && find . -type f | sort | xargs ls -l)
echo "CPUSHIELD-UEFI: efibootmgr:"; efibootmgr -v || true
rm -rf /job/* /results/*
echo CPUSHIELD-UEFI-INSTALLED
UEFI_SETUP_EOF
HASH_IN=$(printf '%s\n' "$PKGS" "$UNIT" "$JOB" 3 "${MMOPTS[@]}")
[ $GRUB = 1 ] && HASH_IN=$(printf '%s\n' "$HASH_IN" grub "$GRUB_SETUP")
# (trixie-k8s's hash leaves out CRI-O's and containerd 2's files: build-crio.sh,
# build-containerd2.sh, k8s/crio/, k8s/containerd2/; trixie-crio's those of containerd 2)
[ "$SUITE" = trixie-k8s ] && HASH_IN=$(printf '%s\n' "$HASH_IN" k8s "$(cat "$K8S_BIN/versions.txt" $(ls "$VM_DIR"/k8s/*.sh | grep -Ev '/build-(crio|containerd2)\.sh$') "$VM_DIR"/k8s/node/* | sha256sum)")
[ "$SUITE" = trixie-crio ] && HASH_IN=$(printf '%s\n' "$HASH_IN" crio "$(cat "$K8S_BIN/versions.txt" "$K8S_BIN/crio-versions.txt" $(ls "$VM_DIR"/k8s/*.sh | grep -v '/build-containerd2\.sh$') "$VM_DIR"/k8s/node/* "$VM_DIR"/k8s/crio/* | sha256sum)")
[ "$SUITE" = trixie-k8s2 ] && HASH_IN=$(printf '%s\n' "$HASH_IN" k8s2 "$(cat "$K8S_BIN/versions.txt" "$K8S_BIN/containerd2-versions.txt" $(ls "$VM_DIR"/k8s/*.sh | grep -v '/build-crio\.sh$') "$VM_DIR"/k8s/node/* "$VM_DIR"/k8s/containerd2/* | sha256sum)")
[ -n "$UEFI" ] && HASH_IN=$(printf '%s\n' "$HASH_IN" uefi "$UEFI" "$UEFI_SETUP")
HASH=$(printf '%s\n' "$HASH_IN" | sha256sum | cut -c1-12)
OUT=$CACHE_DIR/distro/$SUITE-$HASH
[ $GRUB = 1 ] && OUT=$CACHE_DIR/distro/$SUITE-grub-$HASH
[ -n "$UEFI" ] && OUT=$CACHE_DIR/distro/$SUITE-uefi-$UEFI-$HASH
if [ -f "$OUT/.done" ]; then echo "$OUT"; exit 0; fi
[ $GRUB = 1 ] && need_cmd sfdisk qemu-system-x86_64 tar timeout
if [ -n "$UEFI" ]; then
    need_cmd sfdisk mkfs.vfat qemu-system-x86_64 tar timeout
    [ -f "$OVMF_CODE" ] && [ -f "$OVMF_VARS" ] || die "no OVMF at $OVMF_CODE / $OVMF_VARS (apt-get install ovmf, or tests/vm/ci.sh --install-only)"
fi
rm -rf "$OUT"; mkdir -p "$OUT"
ROOTFS=$OUT/rootfs
log "building the $SUITE image$([ $GRUB = 1 ] && echo ' booted through GRUB')$([ -n "$UEFI" ] && echo " booted through UEFI ($UEFI)") (mmdebstrap, about a minute)"
printf '%s\n' "$UNIT" >"$OUT/cpushield-job.service"
printf '%s\n' "$JOB" >"$OUT/cpushield-job"
mmdebstrap --quiet --variant=minbase --include="$PKGS" "${MMOPTS[@]}" "${PRESEED[@]}" \
    --customize-hook='echo cpushield-guest >"$1/etc/hostname"' \
    --customize-hook="$FSTAB_HOOK" \
    --customize-hook='chroot "$1" passwd -d root' \
    --customize-hook="copy-in $OUT/cpushield-job.service /etc/systemd/system" \
    --customize-hook="copy-in $OUT/cpushield-job /usr/local/sbin" \
    --customize-hook='chmod 755 "$1/usr/local/sbin/cpushield-job"' \
    --customize-hook='chroot "$1" systemctl enable cpushield-job.service' \
    --customize-hook='chroot "$1" systemctl mask serial-getty@ttyS0.service getty@tty1.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer 2>/dev/null || true' \
    "${K8S_HOOK[@]}" \
    "$DIST" "$ROOTFS" >"$OUT/mmdebstrap.log" 2>&1 || { tail -20 "$OUT/mmdebstrap.log" >&2; die "mmdebstrap $SUITE failed (log: $OUT/mmdebstrap.log)"; }
cp "$(ls "$ROOTFS"/boot/vmlinuz-* | head -n1)" "$OUT/vmlinuz"
cp "$(ls "$ROOTFS"/boot/initrd.img-* | head -n1)" "$OUT/initrd.img"
basename "$(ls "$ROOTFS"/boot/vmlinuz-* | head -n1)" | sed 's/^vmlinuz-//' >"$OUT/release"
if [ $GRUB = 0 ] && [ -z "$UEFI" ]; then
    mke2fs -q -t ext4 -d "$ROOTFS" "$OUT/root.img" 3G >"$OUT/mke2fs.log" 2>&1 || die "mke2fs failed (log: $OUT/mke2fs.log)"
    rm -rf "$ROOTFS"
    touch "$OUT/.done"
    echo "$OUT"
    exit 0
fi

if [ $GRUB = 1 ]; then
# --grub: partition 1 from 1 MiB on (the gap before it holds GRUB's core.img)
mke2fs -q -t ext4 -d "$ROOTFS" "$OUT/part1.img" 3G >"$OUT/mke2fs.log" 2>&1 || die "mke2fs failed (log: $OUT/mke2fs.log)"
rm -rf "$ROOTFS"
truncate -s $((3072 + 1))M "$OUT/root.img"
printf 'label: dos\nstart=2048, type=83, bootable\n' | sfdisk --quiet "$OUT/root.img" >"$OUT/sfdisk.log" 2>&1 || die "sfdisk failed (log: $OUT/sfdisk.log)"
dd if="$OUT/part1.img" of="$OUT/root.img" bs=1M seek=1 conv=notrunc,sparse status=none
rm -f "$OUT/part1.img"
else
# --uefi: GPT; partition 1 the ESP (1 MiB to 301 MiB, FAT32 made here),
# partition 2 the ext4 root (3 GiB), 1 MiB at the end for the backup GPT
mke2fs -q -t ext4 -d "$ROOTFS" "$OUT/part2.img" 3G >"$OUT/mke2fs.log" 2>&1 || die "mke2fs failed (log: $OUT/mke2fs.log)"
rm -rf "$ROOTFS"
rm -f "$OUT/esp.img"
mkfs.vfat -F 32 -n ESP -h 2048 -C "$OUT/esp.img" $((300 * 1024)) >"$OUT/mkfs.vfat.log" 2>&1 || die "mkfs.vfat failed (log: $OUT/mkfs.vfat.log)"
truncate -s $((1 + 300 + 3072 + 1))M "$OUT/root.img"
printf '%s\n' 'label: gpt' 'start=2048, size=614400, type=U, name="EFI System Partition"' \
    'start=616448, size=6291456, type=L, name=root' | sfdisk --quiet "$OUT/root.img" >"$OUT/sfdisk.log" 2>&1 || die "sfdisk failed (log: $OUT/sfdisk.log)"
dd if="$OUT/esp.img" of="$OUT/root.img" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$OUT/part2.img" of="$OUT/root.img" bs=1M seek=301 conv=notrunc,sparse status=none
rm -f "$OUT/esp.img" "$OUT/part2.img"
fi
# guest JOBDIR LOG LIMIT QEMU-ARGS...: one QEMU run with the tar of JOBDIR on
# /dev/vdb and an empty results disk on /dev/vdc; its console into LOG
guest() {
    local jobdir=$1 logf=$2 limit=$3; shift 3
    tar -cf "$OUT/job.tar" -C "$jobdir" .
    rm -f "$OUT/results.img"; truncate -s 16M "$OUT/results.img"
    timeout -k 5 "$limit" qemu-system-x86_64 -accel tcg,thread=single -cpu "$QEMU_CPU" -smp 2 -m 1536 \
        -nographic -no-reboot -vga none "$@" \
        -drive "file=$OUT/job.tar,if=virtio,format=raw,readonly=on" \
        -drive "file=$OUT/results.img,if=virtio,format=raw,cache=unsafe" \
        -netdev user,id=n0 -device virtio-net-pci,netdev=n0,romfile= </dev/null 2>&1 | tr -d '\r' >"$logf" || true
    rm -f "$OUT/job.tar" "$OUT/results.img"
}
if [ -n "$UEFI" ]; then
    # the image's NVRAM: the install boot may write to it (bootctl
    # registers a Boot#### entry); the check boot and every run use a copy
    cp "$OVMF_VARS" "$OUT/OVMF_VARS.fd"
    mkdir -p "$OUT/job"
    printf '%s\n' '#!/bin/sh' "KIND=$UEFI" "$UEFI_SETUP" >"$OUT/job/run.sh"
    log "installing the loader ($UEFI) on the disk: a boot under OVMF with -kernel and root=/dev/vda2"
    t0=$(date +%s)
    guest "$OUT/job" "$OUT/uefi-install.log" 900 -machine "$UEFI_MACHINE" \
        -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE" \
        -drive "if=pflash,format=raw,unit=1,file=$OUT/OVMF_VARS.fd" \
        -kernel "$OUT/vmlinuz" -initrd "$OUT/initrd.img" \
        -append "root=/dev/vda2 rw console=ttyS0 panic=-1 quiet loglevel=3 systemd.show_status=0" \
        -drive "file=$OUT/root.img,if=virtio,format=raw,cache=unsafe"
    grep -q '^CPUSHIELD-UEFI-INSTALLED' "$OUT/uefi-install.log" || { tail -n 40 "$OUT/uefi-install.log" >&2; die "installing $UEFI in the guest failed (log: $OUT/uefi-install.log)"; }
    log "$UEFI installed ($(( $(date +%s) - t0 ))s); a boot from the disk through OVMF to check it"
    printf '%s\n' '#!/bin/sh' \
        'ev() { f=/sys/firmware/efi/efivars/$1-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f; [ -f "$f" ] && cat "$f" | tail -c +5 | iconv -f UTF-16LE -t UTF-8 | tr -d "\000"; true; }' \
        'printf "CPUSHIELD-UEFI-CMDLINE: %s\n" "$(cat /proc/cmdline)"' \
        'printf "CPUSHIELD-UEFI-LOADER: %s\n" "LoaderInfo=$(ev LoaderInfo) LoaderEntrySelected=$(ev LoaderEntrySelected) StubInfo=$(ev StubInfo)"' \
        >"$OUT/job/run.sh"
    cp "$OUT/OVMF_VARS.fd" "$OUT/check-vars.fd"
    t0=$(date +%s)
    guest "$OUT/job" "$OUT/uefi-check.log" 900 -machine "$UEFI_MACHINE" \
        -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE" \
        -drive "if=pflash,format=raw,unit=1,file=$OUT/check-vars.fd" \
        -drive "file=$OUT/root.img,if=none,id=root,format=raw,snapshot=on,cache=unsafe" \
        -device virtio-blk-pci,drive=root,bootindex=0
    rm -rf "$OUT/job" "$OUT/check-vars.fd"
    loader=$(sed -n 's/^CPUSHIELD-UEFI-LOADER: //p' "$OUT/uefi-check.log")
    case $UEFI in
        sdboot) ok=$(echo "$loader" | grep 'LoaderInfo=systemd-boot' | grep -v 'StubInfo=systemd-stub' || true) ;;
        uki) ok=$(echo "$loader" | grep 'LoaderInfo=systemd-boot' | grep 'StubInfo=systemd-stub' || true) ;;
        grub-efi) ok=$(grep '^CPUSHIELD-UEFI-CMDLINE: BOOT_IMAGE=' "$OUT/uefi-check.log" || true) ;;
    esac
    [ -n "$ok" ] || { tail -n 30 "$OUT/uefi-check.log" >&2; die "the disk did not boot through $UEFI (log: $OUT/uefi-check.log)"; }
    log "booted through $UEFI ($(( $(date +%s) - t0 ))s): $(sed -n 's/^CPUSHIELD-UEFI-CMDLINE: //p' "$OUT/uefi-check.log"); $loader"
    touch "$OUT/.done"
    echo "$OUT"
    exit 0
fi
mkdir -p "$OUT/job"
printf '%s\n' "$GRUB_SETUP" >"$OUT/job/run.sh"
log "installing GRUB on the disk: a boot with -kernel and root=/dev/vda1 (about a minute)"
t0=$(date +%s)
guest "$OUT/job" "$OUT/grub-install.log" 600 \
    -kernel "$OUT/vmlinuz" -initrd "$OUT/initrd.img" \
    -append "root=/dev/vda1 rw console=ttyS0 panic=-1 quiet loglevel=3 systemd.show_status=0" \
    -drive "file=$OUT/root.img,if=virtio,format=raw,cache=unsafe"
grep -q '^CPUSHIELD-GRUB-INSTALLED' "$OUT/grub-install.log" || { tail -n 30 "$OUT/grub-install.log" >&2; die "installing GRUB in the guest failed (log: $OUT/grub-install.log)"; }
log "GRUB installed ($(( $(date +%s) - t0 ))s); a boot through SeaBIOS and GRUB to check it"
printf '%s\n' '#!/bin/sh' 'echo "CPUSHIELD-GRUB-CMDLINE: $(cat /proc/cmdline)"' >"$OUT/job/run.sh"
t0=$(date +%s)
guest "$OUT/job" "$OUT/grub-check.log" 600 \
    -drive "file=$OUT/root.img,if=none,id=root,format=raw,snapshot=on,cache=unsafe" \
    -device virtio-blk-pci,drive=root,bootindex=0
rm -rf "$OUT/job"
grep -q '^CPUSHIELD-GRUB-CMDLINE: BOOT_IMAGE=' "$OUT/grub-check.log" || { tail -n 30 "$OUT/grub-check.log" >&2; die "the disk did not boot through GRUB (log: $OUT/grub-check.log)"; }
log "booted through GRUB ($(( $(date +%s) - t0 ))s): $(sed -n 's/^CPUSHIELD-GRUB-CMDLINE: //p' "$OUT/grub-check.log")"
touch "$OUT/.done"
echo "$OUT"
