#!/usr/bin/env bash
# After a red ctest run: the end of each failed test's output, printed last
# so that a log viewer that keeps only the tail (CI) still shows why each
# test failed (ctest's own list of skipped tests comes after the output).
# Usage: scripts/failed-tests.sh BUILD_DIR [LINES]
set -uo pipefail
build=${1:?usage: scripts/failed-tests.sh BUILD_DIR [LINES]}
lines=${2:-60}
failed=$build/Testing/Temporary/LastTestsFailed.log
log=$build/Testing/Temporary/LastTest.log
if [[ ! -s $failed || ! -f $log ]]; then
  echo "failed-tests.sh: no failed tests recorded in $build"
  exit 0
fi
while IFS=: read -r _ name; do
  [[ -n $name ]] || continue
  echo "==================== failed: $name (last $lines lines) ===================="
  awk -v name="$name" '
    $0 ~ "^[0-9]+/[0-9]+ Testing: " && $3 == name { inside = 1; next }
    inside && /^[0-9]+\/[0-9]+ Testing: / { inside = 0 }
    inside { print }' "$log" | grep -v '^"[^"]*" # Uses: ' | tail -n "$lines"
done < "$failed"
