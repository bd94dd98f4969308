"""The op catalogue is one table in two halves keyed identically: the
client-visible half (``kungfud.wire.OPS``: kind, args type, doc) and the
executable half (``kungfud.actors.ops.ACTIONS`` for actions, the read table for
reads). A row missing in either half would only show up as a ``KeyError`` at
request time; here it fails at once (docs/architecture.md, "Adding an op")."""

from __future__ import annotations

from kungfud import wire
from kungfud.actors.ops import ACTIONS, DEADLINE, DEADLINE_TASK, PRECHECKS
from kungfud.reads import READS
from kungfud.webhooks.precheck import prechecks

# Ops the server answers itself: authentication and the event stream.
SERVER_OPS = {"hello", "subscribe"}
INTERNAL_JOBS = {DEADLINE, DEADLINE_TASK}  # actions no client sends: the deadline clock's


def test_every_action_op_has_exactly_one_executable_row():
    wire_actions = {op for op, spec in wire.OPS.items() if spec.kind == "A"}
    assert wire_actions == wire.ACTION_OPS
    assert set(ACTIONS) - INTERNAL_JOBS == wire_actions
    for op in wire_actions:
        assert ACTIONS[op].command is not None, f"{op} has no command builder"
    for op in INTERNAL_JOBS:
        assert op not in wire.OPS and ACTIONS[op].command is None


def test_every_read_op_has_exactly_one_read_row():
    wire_reads = {op for op, spec in wire.OPS.items() if spec.kind == "R"} - SERVER_OPS
    assert set(READS) == wire_reads


def test_every_op_is_described_in_its_row():
    for op, spec in wire.OPS.items():
        assert spec.doc.strip() and spec.doc.strip()[-1] == ".", f"{op}: doc must be one plain sentence"


def test_every_precheck_the_catalogue_names_is_one_the_daemon_gives():
    """An action whose row names a ``precheck`` is awaited on it before routing
    (D286): the daemon hands the server ``webhooks.precheck.prechecks``, which
    must answer every name, and names nothing no row uses. ``webhook.set``
    resolves its host first (D216)."""
    assert PRECHECKS == set(prechecks(()))
    assert ACTIONS["webhook.set"].precheck == "public_host"
    # A2A push configs: the same URL rules at set (WIRE.md 1.3, D411)
    assert ACTIONS["a2a.push.set"].precheck == ACTIONS["a2a.send"].precheck == "push_host"
