#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian 12 machine (run as root,
# or with sudo available). CUDA (nvcc, cuBLAS, cuDNN, NCCL) is expected to be present
# already where GPU targets are wanted; everything else comes from Debian.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
# iproute2: ip and tc, for the cluster on one machine (scripts/cluster.sh); jq, bc, procps
# (pgrep) and time (/usr/bin/time: peak memory) for the tests and benchmarks. Minimal images
# lack them.
pkgs=(build-essential libpcre2-dev libcjson-dev libcmocka-dev zlib1g-dev
      openmpi-bin libopenmpi-dev liburing-dev libssl-dev python3 python3-numpy python3-matplotlib iproute2
      jq bc procps time)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install_deps: all packages present"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo > /dev/null ||
        { echo "install_deps: missing ${missing[*]}, and no sudo: as root, run apt-get install ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
fi
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
# env inside sudo: sudo's env_reset would drop the variable, and apt could wait at a prompt
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
echo "install_deps: done"
