"""The kv layer's contract (kungfud/store/kv.py; docs/storage.md "The store
interface", D101): what every backend's ``Snapshot``, ``Tx`` and ``WriteTxn``
must do, whatever stores the rows. Everything above the kv layer — the named
queries, the planner, the write engine, check and migration — relies on exactly
this, so a backend that passes it answers them as LMDB does.

Part of :class:`tests.store.contract.StoreContract` (a backend runs both by
subclassing it); uses only ``backend.store`` as a ``Backend``: ``read()`` (a
View whose ``kv`` is its Snapshot) and ``begin_write()``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from kungfud.store.kv import Tx, prefix_stop

__all__ = ["KvContract"]

T = "memories"  # any table of layout.DBS a fresh store leaves empty


@contextmanager
def writing(backend: Any) -> Iterator[Tx]:
    """One write transaction, committed when the block ends (aborted if it raises)."""
    w = backend.store.begin_write()
    try:
        yield w.tx
    except BaseException:
        w.abort()
        raise
    w.commit()


def rows(backend: Any, table: str = T, *args: Any, **kw: Any) -> list[tuple[bytes, bytes]]:
    with backend.store.read() as view:
        return list(view.kv.scan(table, *args, **kw))


# Keys around the edges a prefix scan meets: the prefix itself, a 0 and a 0xff
# byte after it, the prefix's last byte +1, and neighbours on both sides.
EDGE_KEYS = [b"a", b"a\x00", b"a\x00\x00", b"a\x00\xff", b"a\x01", b"ab", b"a\xff", b"a\xff\xff", b"b", b"b\x00", b"\xff"]


def fill(backend: Any, keys: list[bytes] = EDGE_KEYS) -> None:
    with writing(backend) as tx:
        for k in reversed(keys):  # written out of order: the table orders them
            tx.put(T, k, b"v" + k)


class KvContract:
    """The kv layer's guarantees; mixed into StoreContract."""

    @pytest.mark.rules("L1-4")
    def test_kv_get_reads_a_committed_row_and_none_for_an_absent_key(self, backend: Any):
        fill(backend)
        with backend.store.read() as view:
            assert view.kv.get(T, b"a\x00") == b"va\x00"
            assert view.kv.get(T, b"a\x00\x01") is None
            assert view.kv.get("objects", b"a\x00") is None  # tables are separate
            assert view.kv.count(T) == len(EDGE_KEYS)

    @pytest.mark.rules("L1-4")
    def test_kv_scan_is_in_unsigned_byte_order_forward_and_reverse(self, backend: Any):
        fill(backend)
        ordered = sorted(EDGE_KEYS)
        assert ordered[-1] == b"\xff" and ordered[0] == b"a"  # 0xff sorts last: unsigned
        assert rows(backend) == [(k, b"v" + k) for k in ordered]
        assert rows(backend, T, reverse=True) == [(k, b"v" + k) for k in reversed(ordered)]

    @pytest.mark.rules("L1-4")
    @pytest.mark.parametrize("start,stop", [
        (b"", None), (b"a", None), (b"a\x00", b"a\x01"), (b"a", b"a"), (b"a\x00\x00", b"ab"),
        (b"a\x00\x01", b"a\xff"), (b"0", b"a"), (b"b\x01", None), (b"c", b"d"), (b"", b"a\x00"),
    ])
    def test_kv_scan_range_includes_start_and_excludes_stop(self, backend: Any, start: bytes, stop: bytes | None):
        fill(backend)
        want = [k for k in sorted(EDGE_KEYS) if k >= start and (stop is None or k < stop)]
        assert [k for k, _ in rows(backend, T, start, stop)] == want
        assert [k for k, _ in rows(backend, T, start, stop, reverse=True)] == want[::-1]

    @pytest.mark.rules("L1-4")
    @pytest.mark.parametrize("prefix", [b"a", b"a\x00", b"a\xff", b"b", b"\xff", b"z"])
    def test_kv_prefix_scan_gives_exactly_the_keys_with_the_prefix(self, backend: Any, prefix: bytes):
        fill(backend)
        want = [k for k in sorted(EDGE_KEYS) if k.startswith(prefix)]
        stop = prefix_stop(prefix)
        assert [k for k, _ in rows(backend, T, prefix, stop)] == want
        assert [k for k, _ in rows(backend, T, prefix, stop, reverse=True)] == want[::-1]

    def test_prefix_stop_is_the_first_key_past_the_prefix(self):
        assert prefix_stop(b"ab\x00") == b"ab\x01"
        assert prefix_stop(b"a\xff") == b"b"
        assert prefix_stop(b"a\xff\xff") == b"b"
        assert prefix_stop(b"\xff\xff") is None and prefix_stop(b"") is None

    @pytest.mark.rules("L1-4")
    def test_kv_scan_without_values_gives_the_keys_with_empty_values(self, backend: Any):
        fill(backend)
        assert rows(backend, T, b"a", b"b", values=False) == [(k, b"") for k in sorted(EDGE_KEYS) if b"a" <= k < b"b"]
        assert rows(backend, T, values=False, reverse=True)[0] == (b"\xff", b"")

    @pytest.mark.rules("L1-4")
    def test_kv_scan_is_lazy_and_may_stop_early(self, backend: Any):
        fill(backend)
        with backend.store.read() as view:
            it = view.kv.scan(T, b"a")
            assert next(it) == (b"a", b"va")
            assert next(it) == (b"a\x00", b"va\x00")
            it.close()  # stopping early is allowed
            assert next(view.kv.scan(T, reverse=True)) == (b"\xff", b"v\xff")

    @pytest.mark.rules("L1-4")
    def test_kv_put_replaces_delete_removes_and_a_tx_reads_its_own_writes(self, backend: Any):
        fill(backend)
        with writing(backend) as tx:
            tx.put(T, b"a", b"new")
            tx.delete(T, b"ab")
            tx.delete(T, b"never there")  # deleting an absent key is not an error
            assert tx.get(T, b"a") == b"new" and tx.get(T, b"ab") is None
            assert [k for k, _ in tx.scan(T, b"a", b"b")] == [k for k in sorted(EDGE_KEYS) if b"a" <= k < b"b" and k != b"ab"]
            assert tx.count(T) == len(EDGE_KEYS) - 1
        with backend.store.read() as view:
            assert view.kv.get(T, b"a") == b"new" and view.kv.get(T, b"ab") is None
            assert view.kv.count(T) == len(EDGE_KEYS) - 1

    @pytest.mark.rules("L1-2")
    def test_kv_a_log_row_is_never_replaced(self, backend: Any):
        key = (1 << 62).to_bytes(8, "big")
        with writing(backend) as tx:
            tx.put("log", key, b"first")
            tx.put("log", key, b"second")
            assert tx.get("log", key) == b"first"
        with writing(backend) as tx:
            tx.put("log", key, b"third")
        with backend.store.read() as view:
            assert view.kv.get("log", key) == b"first"

    @pytest.mark.rules("L1-4")
    def test_kv_clear_empties_one_table_only(self, backend: Any):
        fill(backend)
        with writing(backend) as tx:
            tx.put("tokens", b"t", b"th")
        with writing(backend) as tx:
            tx.clear(T)
            assert tx.count(T) == 0 and list(tx.scan(T)) == []
        assert rows(backend) == [] and rows(backend, "tokens") == [(b"t", b"th")]

    @pytest.mark.rules("L2-1")
    def test_kv_a_nested_abort_discards_only_the_nested_writes(self, backend: Any):
        w = backend.store.begin_write()
        w.tx.put(T, b"outer", b"1")
        n = w.nested()
        n.tx.put(T, b"inner", b"2")
        n.tx.delete(T, b"outer")
        assert n.tx.get(T, b"inner") == b"2" and n.tx.get(T, b"outer") is None
        n.abort()
        assert w.tx.get(T, b"inner") is None and w.tx.get(T, b"outer") == b"1"
        w.commit()
        assert rows(backend) == [(b"outer", b"1")]

    @pytest.mark.rules("L2-1")
    def test_kv_a_nested_commit_is_kept_by_the_outer_commit(self, backend: Any):
        w = backend.store.begin_write()
        w.tx.put(T, b"outer", b"1")
        n = w.nested()
        n.tx.put(T, b"inner", b"2")
        n.commit()
        assert w.tx.get(T, b"inner") == b"2"
        after = w.nested()  # a second nested transaction after the first one
        after.tx.put(T, b"later", b"3")
        after.abort()
        w.commit()
        assert rows(backend) == [(b"inner", b"2"), (b"outer", b"1")]

    @pytest.mark.rules("L2-1")
    def test_kv_an_outer_abort_discards_a_committed_nested_transaction(self, backend: Any):
        w = backend.store.begin_write()
        n = w.nested()
        n.tx.put(T, b"inner", b"2")
        n.commit()
        w.abort()
        assert rows(backend) == []
        with writing(backend) as tx:  # the store takes writes again after the abort
            tx.put(T, b"x", b"y")
        assert rows(backend) == [(b"x", b"y")]

    @pytest.mark.rules("R9-5", "R12-10")
    def test_kv_a_snapshot_opened_before_a_commit_does_not_see_it(self, backend: Any):
        fill(backend, [b"k"])
        with backend.store.read() as old:
            assert old.kv.get(T, b"k") == b"vk"  # the snapshot is taken by now on every backend
            with writing(backend) as tx:
                tx.put(T, b"k", b"changed")
                tx.put(T, b"k2", b"new")
                tx.put("tokens", b"t", b"th")
            assert old.kv.get(T, b"k") == b"vk" and old.kv.get(T, b"k2") is None
            assert list(old.kv.scan(T)) == [(b"k", b"vk")] and old.kv.count(T) == 1
            assert old.kv.get("tokens", b"t") is None
            with backend.store.read() as new:
                assert new.kv.get(T, b"k") == b"changed" and new.kv.count(T) == 2
