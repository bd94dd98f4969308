"""Storage format 4 (D271): the migration step that moves a Task's live
engagements out of its snapshot into ``live`` rows (store/task_rows.py).
Run on the format-2 fixture (written by 57bd251: a Task with a running
engagement and one adopted), whose Tasks are format 3's: the step's puts are
exactly what the current fold derives for those objects and rows."""

from __future__ import annotations

import msgspec
import pytest

from kungfud.core.task import TaskState
from kungfud.store.check import expected_indexes
from kungfud.store.layout import decode_object
from kungfud.store.open import open_store
from kungfud.store.task_rows import step_3_to_4
from tests.store.test_migration import _unpack


@pytest.mark.rules("L1-1")
def test_L1_1_step_3_to_4_writes_the_tasks_and_live_rows_the_log_derives(tmp_path):
    data = _unpack(tmp_path, "v2")
    store = open_store("lmdb", str(data), readonly=True, lock=False)
    try:
        with store.read() as view:
            old_tasks = {k: v for k, v in view.kv.scan("objects", b"tk_", None) if k.startswith(b"tk_") and b"." not in k}
            assert old_tasks and all(b"open_by_agent" in v for v in old_tasks.values())  # format 3's shape
            puts = step_3_to_4(view.kv)
            expected = expected_indexes(store, view.kv)
    finally:
        store.close()
    # each Task's snapshot, re-encoded: what the fold of its facts encodes (version unchanged)
    assert set(puts["objects"]) == set(old_tasks)
    for key, raw in puts["objects"].items():
        assert raw == expected["objects"][key]
        assert b"open_by_agent" not in raw and decode_object(raw, TaskState)[0] == decode_object(old_tasks[key], TaskState)[0]
    # the live rows of the running engagement, and only the Tasks' ones
    task_live = {k: v for k, v in expected["live"].items() if k.startswith(b"tk_")}
    assert task_live and puts["live"] == task_live
    running = [k for k in task_live if k.split(b"\x00", 1)[1][:1] == b"a"]
    assert len(running) == 1  # the fixture's one engagement still taken
    assert msgspec.msgpack.decode(task_live[running[0]])[1] == "taken"
