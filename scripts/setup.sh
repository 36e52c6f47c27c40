#!/usr/bin/env bash
# Installs the Debian packages grape builds with, only those that are missing. Needs root.
set -euo pipefail
packages=(cmake g++ make ccache libeigen3-dev libboost-dev librapidcheck-dev libgtest-dev
          libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev libsleef-dev pkgconf gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "grape: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
