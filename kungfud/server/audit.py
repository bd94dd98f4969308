"""The audit log (WIRE.md "Operating a deployment"): one line per action
outcome on the logger ``kungfud.audit`` at INFO.

A line holds ``at, agent, op``, ``ok`` (and ``code`` when refused),
``replayed``, and ``ids``: the object ids the receipt names. Never content,
keys or tokens: only id-shaped strings and entry/version/seq numbers are taken
from a receipt, and its secret fields are skipped by name as well. With
``--log-format json`` the fields are the line's JSON object (see
:mod:`kungfud.logs`); in text the message is the same object as JSON.
``[server] audit_log = false`` turns it off.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import msgspec

from ..conventions import SECRET_FIELDS, rfc3339

__all__ = ["log", "record", "receipt_ids"]

log = logging.getLogger("kungfud.audit")

_ID = re.compile(r"^(ag|me|th|as|tk|en|ad)_[0-9a-z_]{1,60}$")
_NUMBERS = frozenset({"entry", "version", "contract_version", "seq"})
_dec = msgspec.json.Decoder()


def _ids_of(obj: dict, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k in SECRET_FIELDS or k == "content":
            continue
        if isinstance(v, str) and _ID.match(v):
            out[k] = v
        elif k in _NUMBERS and isinstance(v, int) and not isinstance(v, bool):
            out[k] = v
        elif isinstance(v, list) and v and all(isinstance(x, str) and _ID.match(x) for x in v):
            out[k] = v
        elif isinstance(v, dict) and depth == 0:
            inner = _ids_of(v, 1)
            if inner:
                out[k] = inner
    return out


def receipt_ids(result: bytes | None) -> dict[str, Any]:
    """The ids a receipt (JSON) names, by field."""
    if not result:
        return {}
    try:
        obj = _dec.decode(result)
    except msgspec.DecodeError:
        return {}
    return _ids_of(obj) if isinstance(obj, dict) else {}


def record(
    at_ms: int, agent: str | None, op: str, *, code: str | None = None, replayed: bool = False, result: bytes | None = None
) -> None:
    """Log one action outcome: accepted (``code`` None) or refused with ``code``."""
    if not log.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {"at": rfc3339(at_ms), "agent": agent, "op": op, "ok": code is None}
    if code is not None:
        fields["code"] = code
    fields["replayed"] = replayed
    if code is None:
        fields["ids"] = receipt_ids(result)
    log.info("%s", json.dumps(fields, separators=(",", ":")), extra={"audit": fields})
