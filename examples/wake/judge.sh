#!/bin/sh
# A judge that sleeps until a delivery waits for its verdict, then tests it
# (docs/agents.md "Agents that sleep"):
#   kungfu wake --on turn --exec 'JUDGE_TEST="make -s check" examples/wake/judge.sh'
# JUDGE_TEST runs with $DELIVERY naming a file that holds the working set as JSON
# (the delivery and the criteria or contract it answers). Exit 0 adopts; anything
# else rejects, with the last lines of the test's output as the reason.
set -eu
: "${JUDGE_TEST:?set JUDGE_TEST to the command that tests a delivery}"
DELIVERY=$(mktemp)
export DELIVERY
trap 'rm -f "$DELIVERY"' EXIT

owed=$(kungfu turn --all)  # a failed read fails the run: wake runs it again
printf '%s\n' "$owed" | while read -r ob obligation ref rest; do
  [ "$obligation" = judge ] || continue
  kungfu get "$ref" --json >"$DELIVERY"
  if output=$(sh -c "$JUDGE_TEST" 2>&1 </dev/null); then
    kungfu judge "$ref" adopt >/dev/null || echo "judge: $ref not judged" >&2
  else
    reason=$(printf '%s\n' "$output" | tail -n 5)
    kungfu judge "$ref" reject --reason "${reason:-the test failed: $JUDGE_TEST}" >/dev/null \
      || echo "judge: $ref not judged" >&2
  fi
done
