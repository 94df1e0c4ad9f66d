#!/usr/bin/env bash
# Install the Debian packages that loaderx needs to build, test and demo,
# but only those that are missing (apt-get update runs at most once).
set -euo pipefail
pkgs=(build-essential autoconf automake libtool pkg-config
      libzstd-dev libmsgpack-dev check libfuse3-dev fuse3
      python3-numpy python3-cffi python3-pytest adwaita-icon-theme file)
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
