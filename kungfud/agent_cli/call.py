"""One request a command line stands for: :class:`PlannedCall` (its op, args,
idempotency key, whether to follow cursors), and the words of the command line
a rejection is shown in (:data:`FLAG_OF`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..wire import OPS

__all__ = ["PlannedCall", "FLAG_OF"]


#: The wire fields a subcommand fills from a flag, and that flag: a rejection
#: that names the field is shown naming what the user typed (issue 37).
FLAG_OF = {
    "assign.to": "--assign-to", "assign.content": "--assign-content", "assign.redoes": "--redoes",
    "assign.deliver_within_s": "--deliver-within", "assign.judge_within_s": "--judge-within",
    "contract.deliver_within_s": "--deliver-within", "contract.judge_within_s": "--judge-within",
    "contract.adoption_limit": "--adoption-limit", "contract.on_no_judgment": "--on-no-judgment",
    "contract.judge": "--judge", "contract.eligibility": "--eligible", "contract.inputs": "--input",
    "reply_to": "--reply-to", "content.reason": "--reason", "content.note": "--note", "limit": "--limit",
    "ask": "--ask", "thread": "THREAD",
}


# The daemon's "put it in content" phrases, for the flags that fill those fields.
_PHRASES = {'`"content": {"reason": "…"}`': "`--reason TEXT`", '`"content": {"note": "…"}`': "`--note TEXT`"}


@dataclass
class PlannedCall:
    """One request to send: ``op`` with ``args``; ``key`` is the idempotency key
    the user chose (actions get a fresh one when None); ``follow`` pages through
    every cursor of a list read."""

    op: str
    args: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    follow: bool = False
    from_flags: bool = True  # False for ``kungfu call``, whose user wrote the wire fields

    def in_flags(self, reason: str) -> str:
        """A rejection's reason in the words of the command line: ``assign.deliver_within_s``
        becomes ``--deliver-within`` (unchanged for ``kungfu call``)."""
        if not self.from_flags:
            return reason
        for phrase, flag in _PHRASES.items():
            reason = reason.replace(phrase, flag)
        def flag(m: re.Match) -> str:
            field = re.sub(r"\[\d+\]", "", m.group(1))  # ask[0]: the first --ask
            return f"`{FLAG_OF.get(field, m.group(1))}`"

        return re.sub(r"`([a-z_.\[\]0-9]+)`", flag, reason)

    @property
    def is_action(self) -> bool:
        spec = OPS.get(self.op)
        return spec is not None and spec.kind == "A"

    @property
    def needs_agent(self) -> bool:
        spec = OPS.get(self.op)
        return spec is None or not spec.open
