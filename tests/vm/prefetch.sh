#!/usr/bin/env bash
# Fetches the kernels and builds the distribution images that
# tests/vm/ci.sh boots, into the cache, so that its lanes find them there.
# .ci/run runs this beside `cargo test`: the downloads and dpkg's waits
# overlap the compiling instead of holding up a lane. Changes nothing on
# this machine beyond the test bed's cache.
#   tests/vm/prefetch.sh
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
. "$VM_DIR/lib/fetch.sh"
t0=$(date +%s)
# As run.sh calls it: in a command substitution (its helpers end on tests
# that errexit would take for failures), then checked by its result.
for k in 6.1 6.12 7; do
    dir=$(fetch_kernel "$k")
    [ -f "$dir/.done" ] || die "prefetch: kernel $k was not unpacked (in '$dir')"
done
bash "$VM_DIR/distro/image.sh" bookworm "" >/dev/null
bash "$VM_DIR/distro/image.sh" trixie "" >/dev/null
bash "$VM_DIR/distro/image.sh" --grub forky "" >/dev/null
log "prefetch: the kernels and images took $(( $(date +%s) - t0 ))s"
