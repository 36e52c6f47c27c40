#!/usr/bin/env bash
# The main job: install what is missing, build, check every built-in encoding's laws, and inspect
# every bundled model config.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
grape="$root/build/bin/grape"
"$grape" list
status=0
for name in $("$grape" list --names); do
  "$grape" check "$name" || status=1
done
for config in "$root"/examples/configs/*/config.json; do
  [ -e "$config" ] || continue
  "$grape" inspect "$config" || status=1
done
exit $status
