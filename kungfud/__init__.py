"""kungfud: a daemon implementing the Kungfu protocol (v1.0 RC1).

The package's public face is small: the command line (:mod:`kungfud.cli`), the
async client (:mod:`kungfud.client`) and the wire contract (:mod:`kungfud.wire`).
"""

__version__ = "0.1.0"
SPEC_VERSION = "1.0-rc1"

__all__ = ["__version__", "SPEC_VERSION"]
