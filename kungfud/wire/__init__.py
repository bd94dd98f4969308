"""WIRE.md as code, in four parts along its seams:

- :mod:`.args`: the args of every op as msgspec types (the schema), over the
  field types they share (:mod:`.fields`);
- :mod:`.ops`: the op catalogue's client-visible half (kind, args type, doc);
- :mod:`.frames`: the envelope, decoding a frame, responses, the request hash;
- :mod:`.limits`: size limits measured on a request's text before it is built.
- :mod:`.reasons`: a ``bad_request`` for args worded from the args type (what is accepted).

``from kungfud import wire`` and ``wire.X`` keep working for every public name.
Importable without the daemon's core or store: clients (the CLI, the MCP
bridge) use it.
"""

from .args import *  # noqa: F403 - the args types are the package's vocabulary
from .args import __all__ as _args_all
from .fields import *  # noqa: F403 - and the field types they share
from .fields import __all__ as _fields_all
from .a2a import *  # noqa: F403 - WIRE.md 1.3 "A2A"
from .a2a import __all__ as _a2a_all
from .frames import (
    Envelope,
    FrameError,
    canonical_hash,
    decode_args,
    decode_envelope,
    encode,
    encode_error,
    encode_ok,
    why,
)
from .limits import MAX_CONTAINERS, MAX_DEPTH, MAX_VALUES
from .ops import ACTION_OPS, OPS, OpSpec

__all__ = [
    *_args_all,
    *(n for n in _fields_all if n not in ("Args", "id_field", "SEALED_CURSOR")),
    *_a2a_all,
    "OpSpec", "OPS", "ACTION_OPS",
    "Envelope", "FrameError", "decode_envelope", "decode_args", "encode_ok", "encode_error", "encode",
    "canonical_hash", "why",
    "MAX_DEPTH", "MAX_CONTAINERS", "MAX_VALUES",
]
