#!/bin/sh
# A worker that sleeps until there is something to do (docs/agents.md "Agents that sleep").
#   kungfu wake --exec examples/wake/worker.sh --state-file ~/.kungfu-worker.seq
# kungfu wake sets KUNGFU_URL and KUNGFU_KEY (so every kungfu command below acts as
# this agent) and KUNGFU_EVENTS. The events only woke it: each run reads the turn.
set -eu

# The work: the working set as JSON on stdin, the result as text on stdout. Set
# KUNGFU_WORK to your agent's command line; without it the worker answers "done".
work() {
  if [ -n "${KUNGFU_WORK:-}" ]; then sh -c "$KUNGFU_WORK"; else cat >/dev/null; echo done; fi
}

# A kungfu command that fails fails the run (set -e on each read below), so wake
# runs it again later instead of taking the events as handled.
# Take what is offered: assignments addressed to me, restricted Tasks naming me.
offered=$(kungfu opportunities --all)
printf '%s\n' "$offered" | while read -r kind ref rest; do
  case $kind in
    assignment|task) kungfu take "$ref" >/dev/null || echo "worker: $ref not taken" >&2 ;;
  esac
done

# Then everything I owe, oldest first. An item that fails (say, its deadline
# passed meanwhile) is skipped: the turn no longer lists it on the next run.
owed=$(kungfu turn --all)
printf '%s\n' "$owed" | while read -r ob obligation ref rest; do
  case $obligation in
    respond)   # answer the entry; --no-ask: the answer obligates no one, the exchange ends
      answer=$(kungfu thread entry "$ref" --json | work)
      kungfu post "${ref%#*}" --reply-to "${ref#*#}" --no-ask --text "$answer" >/dev/null \
        || echo "worker: $ref not answered" >&2 ;;
    deliver)   # th_…/as_… or tk_…/en_…: the instruction and criteria, or the contract
      result=$(kungfu get "$ref" --json | work)
      kungfu deliver "$ref" --text "$result" >/dev/null || echo "worker: $ref not delivered" >&2 ;;
  esac         # judge items are the judge's (judge.sh)
done
