#!/usr/bin/env bash
# `make demo` on a fresh Debian machine, timed: a minbase Debian root made by
# debootstrap, with git and make and nothing of ours (no Go, no module or
# build cache, no pip cache, no .venv), a clone of this repository at REV,
# and `make demo` run in it as root under /usr/bin/time, each output line
# stamped with the seconds since the start.
#
#   sudo bench/freshdemo.sh [-s SUITE] [-r REV] [-d DIR] [-p] [-k]
#
#   -s SUITE  the Debian release: trixie (13, default) or bookworm (12)
#   -p        the demo's steps one at a time, each timed (wall and CPU):
#             make apt, make venv-run, make build, then make demo (which
#             finds them done); without -p, make demo alone, as a user runs it
#   -r REV    the commit to clone (default HEAD; uncommitted changes are not taken)
#   -d DIR    where the roots live (default /var/tmp/stoker-fresh; outside the
#             repository, never committed)
#   -k        keep the run's root afterwards (default: removed; it holds torch, GBs)
#
# The fresh root is made once, DIR/SUITE-base.tar.gz (debootstrap
# --variant=minbase, then apt-get install git make, then the apt lists and
# archives emptied, as a fresh cloud image has them), and unpacked anew for
# every run into DIR/SUITE-run. The run's log is DIR/SUITE-REV-TIME.log;
# its last lines are /usr/bin/time's. /proc, /sys, /dev and /dev/pts are
# mounted in the root for the run and unmounted on the way out, whatever
# happens. Needs root, debootstrap and the network (Debian's mirror, PyPI,
# the Go module proxy). A benchmark, not a test: not part of make test.
set -euo pipefail
suite=trixie rev=HEAD dir=/var/tmp/stoker-fresh keep= phases=
while getopts s:r:d:pk o; do
	case $o in
	s) suite=$OPTARG ;;
	r) rev=$OPTARG ;;
	d) dir=$OPTARG ;;
	k) keep=1 ;;
	p) phases=1 ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "freshdemo.sh: needs root (debootstrap, chroot, mount)"; exit 2; }
command -v debootstrap >/dev/null || { echo "freshdemo.sh: needs debootstrap (apt-get install debootstrap)"; exit 2; }
repo=$(git rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse --short "$rev")
mirror=${MIRROR:-http://deb.debian.org/debian}
mkdir -p "$dir"
base=$dir/$suite-base.tar.gz
run=$dir/$suite-run

mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -l "${mounted[i]}" 2>/dev/null || true
	done
	mounted=()
}
trap cleanup EXIT
mounts() { # mount /proc, /sys, /dev, /dev/pts into root $1
	mount -t proc proc "$1/proc" && mounted+=("$1/proc")
	mount -t sysfs sys "$1/sys" && mounted+=("$1/sys")
	mount --bind /dev "$1/dev" && mounted+=("$1/dev")
	mount -t devpts -o newinstance,ptmxmode=0666 devpts "$1/dev/pts" && mounted+=("$1/dev/pts")
	cp /etc/resolv.conf "$1/etc/resolv.conf"
}

if [ ! -f "$base" ]; then
	echo "freshdemo.sh: making $base (debootstrap --variant=minbase $suite, git, make)"
	tmp=$dir/$suite-base.tmp
	rm -rf "$tmp"
	debootstrap --variant=minbase "$suite" "$tmp" "$mirror"
	mounts "$tmp"
	chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
		bash -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends git make && apt-get clean && rm -rf /var/lib/apt/lists/*'
	cleanup
	tar -C "$tmp" -czf "$base.tmp" . && mv "$base.tmp" "$base"
	rm -rf "$tmp"
fi

rm -rf "$run"
mkdir -p "$run"
tar -C "$run" -xzf "$base"
# The local CAs this machine trusts (/usr/local/share/ca-certificates: a
# network whose egress re-signs TLS has its CA there) go into the root too;
# ca-certificates, which make apt installs, adds them to its bundle. A
# fresh machine on the open internet needs none of them.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
	mkdir -p "$run/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$run/usr/local/share/ca-certificates/"
fi
git clone -q --no-hardlinks "$repo" "$run/root/stoker"
git -C "$run/root/stoker" checkout -q --detach "$commit"
mounts "$run"

log=$dir/$suite-$commit-$(date -u +%Y%m%dT%H%M%SZ).log
echo "freshdemo.sh: make demo in a fresh $suite root at $commit ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)); log: $log"
# env -i: nothing of this machine's environment (GOFLAGS, GOTOOLCHAIN,
# PIP_*) reaches the run; a fresh root login's PATH and HOME.
set +e
/usr/bin/time -f 'freshdemo: make demo: %e s wall, %U s user, %S s sys, exit %x' \
	chroot "$run" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	bash -c 'cd /root/stoker && for t in '"${phases:+apt venv-run build}"' demo; do
		TIMEFORMAT="freshdemo: make $t: %R s wall, %U s user, %S s sys"
		time make $t </dev/null || exit
	done' 2>&1 |
	python3 -u -c '
import sys, time
t0 = time.monotonic()
for line in sys.stdin:
    print(f"{time.monotonic() - t0:7.1f} {line}", end="", flush=True)
' | tee "$log"
rc=${PIPESTATUS[0]}
set -e
du -sh "$run/root/stoker/.venv" "$run/root/.cache" "$run/root/go" 2>/dev/null | tee -a "$log"
cleanup
[ -n "$keep" ] || rm -rf "$run"
exit "$rc"
