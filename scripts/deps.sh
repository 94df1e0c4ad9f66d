#!/usr/bin/env bash
# Install the Debian packages that loaderx needs to build, test and demo,
# but only those that are missing (apt-get update runs at most once).
#   bash scripts/deps.sh          build, tests and the demo (what CI needs)
#   bash scripts/deps.sh --bench  also the stores and tools the benchmarks
#                                 compare against (bench/run)
#   bash scripts/deps.sh --dev    also the fuzzing, sanitizer and
#                                 reliability tools (doc/reliability.md)
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      libzstd-dev libmsgpack-dev liburing-dev libcurl4-openssl-dev libssl-dev check libfuse3-dev fuse3
      python3-numpy python3-cffi python3-pytest python3-torch
      adwaita-icon-theme file fio strace
      ceph-mon ceph-osd radosgw ceph-common uuid-runtime s3cmd python3-boto3
      libcurl4-openssl-dev curl)
for arg in "$@"; do
    case "$arg" in
    --bench)
        pkgs+=(liblmdb-dev libhdf5-dev libsqlite3-dev squashfuse squashfs-tools
               gnuplot-nox python3-h5py python3-lmdb psmisc s3fs) ;;
    --dev)
        pkgs+=(clang llvm valgrind psmisc) ;;
    *)
        echo "deps.sh: unknown option $arg (use --bench or --dev)" >&2
        exit 2 ;;
    esac
done
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
