"""Profiles: where the daemon URL and the agent key come from (docs/cli.md
"Connecting: URL, key, profiles"): ``--profile``, ``KUNGFU_KEY``/``KUNGFU_URL``, a TOML file of
mode 0600 that ``register --save`` and ``--save-as`` write."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..handshake import DEFAULT_URL
from .exits import UsageError

__all__ = ["DEFAULT_CONFIG", "ClientSettings", "settings", "config_path", "load_profiles", "save_profile"]

DEFAULT_CONFIG = "~/.config/kungfu/profiles.toml"


def config_path() -> Path:
    return Path(os.environ.get("KUNGFU_CONFIG") or DEFAULT_CONFIG).expanduser()


def load_profiles(path: Path) -> dict[str, dict]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read profiles from {path}: {e}") from None
    if path.stat().st_mode & 0o077:
        print(f"kungfu: warning: {path} is readable by others; chmod 600 it", file=sys.stderr)
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def save_profile(path: Path, name: str, values: dict[str, str]) -> None:
    """Rewrite the profile file with ``name`` set, mode 0600, atomically.
    (TOML basic strings accept JSON's string escapes, so json.dumps quotes.)"""
    profiles = load_profiles(path)
    profiles[name] = values
    lines: list[str] = []
    for pname, table in profiles.items():
        lines.append(f"[{_toml_key(pname)}]")
        for k, v in table.items():
            if isinstance(v, (str, int, bool)):
                lines.append(f"{_toml_key(k)} = {json.dumps(v)}")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, "\n".join(lines).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _toml_key(k: str) -> str:
    return k if k and all(c.isascii() and (c.isalnum() or c in "-_") for c in k) else json.dumps(k)


@dataclass
class ClientSettings:
    url: str
    key: str | None
    profile: str  # the profile name in effect (for --save)
    key_from_profile: bool = False  # the key was read from that profile (rotate-key --save rewrites it)


def settings(ns: argparse.Namespace, env: os._Environ | dict = os.environ) -> ClientSettings:
    """Where the URL and agent key come from: an explicit ``--profile`` supplies
    both (``--url`` still wins for the URL); otherwise ``KUNGFU_KEY`` and
    ``KUNGFU_URL``; otherwise the profile named by ``KUNGFU_PROFILE`` or
    ``default``, when it exists; the URL defaults to DEFAULT_URL."""
    explicit = getattr(ns, "profile", None)
    name = explicit or env.get("KUNGFU_PROFILE") or "default"
    url_flag, env_url, env_key = getattr(ns, "url", None), env.get("KUNGFU_URL"), env.get("KUNGFU_KEY")
    if explicit:
        path = config_path()
        prof = load_profiles(path).get(name)
        if prof is None:
            raise UsageError(f"no profile [{name}] in {path}; create one with: kungfu register NAME --save --profile {name}")
        prof = prof or {}
        return ClientSettings(url_flag or prof.get("url") or env_url or DEFAULT_URL, prof.get("key"), name, bool(prof.get("key")))
    if env_key:
        return ClientSettings(url_flag or env_url or DEFAULT_URL, env_key, name)
    prof = load_profiles(config_path()).get(name) or {}
    return ClientSettings(url_flag or env_url or prof.get("url") or DEFAULT_URL, prof.get("key"), name, bool(prof.get("key")))
