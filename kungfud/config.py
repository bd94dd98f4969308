"""Configuration: frozen structs with built-in defaults, loaded from TOML.

Flags override the file, which overrides the defaults; the defaults need no file
(WIRE.md "Configuration"). A key the daemon does not know is an error naming it.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from typing import Annotated, Literal

import msgspec

__all__ = ["Config", "ServerConfig", "StorageConfig", "LimitsConfig", "DefaultsConfig", "TracingConfig", "load", "default_data_dir", "ConfigError"]

Pos = Annotated[int, msgspec.Meta(ge=1)]
Within = Annotated[int, msgspec.Meta(ge=1, le=31_536_000)]
Bytes0 = Annotated[int, msgspec.Meta(ge=0)]  # 0: no limit
Percent = Annotated[int, msgspec.Meta(ge=0, le=100)]  # 0: none


class _Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


class ServerConfig(_Section, frozen=True):
    listen: str = "127.0.0.1:8740"
    path: str = "/v1"
    max_frame_bytes: Pos = 1_048_576
    max_connections: Pos = 10_000
    max_in_flight: Pos = 64
    open_registration: bool = True
    # "auto": uvloop where it is installed (a dependency on Linux and macOS), else
    # asyncio's own loop; "uvloop" insists on it; "asyncio" never uses it.
    event_loop: Literal["auto", "asyncio", "uvloop"] = "auto"
    # One line per action outcome on the logger kungfud.audit (WIRE.md "Operating a deployment").
    audit_log: bool = True
    # Log lines (audit lines too) queued at most while the log's reader stalls;
    # past it they are dropped and counted (kungfud_log_lines_dropped_total; D270).
    log_queue: Pos = 20_000
    # OS threads that carry the Thread, Task and agent actors (D280): each
    # object stays an actor of its own; a key always runs on the same thread.
    actor_threads: Annotated[int, msgspec.Meta(ge=1, le=256)] = 8
    # Processes serving one LMDB data directory on one port (SO_REUSEPORT):
    # 1 = this process alone; "auto" = one per core (docs/operations.md "Workers").
    workers: Pos | Literal["auto"] = 1
    # D231: a connection without a key is closed unless it authenticates (hello)
    # within hello_within_s; at most max_unauthenticated such connections at
    # once (and never more than half of max_connections), and
    # max_unauthenticated_per_address from one address (IPv6: one /64).
    hello_within_s: Annotated[int, msgspec.Meta(ge=1, le=3600)] = 5
    max_unauthenticated: Pos = 1000
    max_unauthenticated_per_address: Pos = 64
    # D232: a browser's Origin must be the daemon's own (the console's) or one
    # of these ("https://console.example"); a daemon listening on loopback
    # answers only to a loopback Host or one of allowed_hosts ("kungfu.internal").
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "kungfud")


class StorageConfig(_Section, frozen=True):
    data_dir: str = ""  # empty: the platform data directory (default_data_dir())
    map_size_mb: Pos = 10_240
    # Where the store is: "lmdb" (LMDB under data_dir) or a PostgreSQL URL
    # "postgresql://user@host:port/db" (docs/storage.md "PostgreSQL"); then
    # data_dir holds only this node's own files.
    url: str = "lmdb"
    # The last part of the store kept for deadline facts and operator actions:
    # an ordinary agent's action is refused once the store is this full (D241;
    # LMDB: of map_size_mb; PostgreSQL: of capacity_mb, without which none).
    reserve_percent: Annotated[int, msgspec.Meta(ge=0, le=50)] = 5
    # PostgreSQL only: the size the database may grow to, which the reserve and
    # the per-agent share are taken of (0: unknown — neither applies; D241).
    capacity_mb: Annotated[int, msgspec.Meta(ge=0)] = 0


def check_store_url(url: str) -> str:
    """``url`` if it names a store kungfud can open, else ConfigError."""
    from .errors import echo

    if url == "lmdb" or url.startswith(("postgresql://", "postgres://")):
        return url
    shown = url.split("://", 1)[0] + "://…" if "://" in url else url  # never echo a password
    raise ConfigError(
        f"storage url {echo(shown)!r} is not a store kungfud can open: use \"lmdb\" (the default) "
        "or a PostgreSQL URL postgresql://USER@HOST:PORT/DATABASE"
    )


class LimitsConfig(_Section, frozen=True):
    actions_per_minute: Pos = 1200
    failed_joins_per_window: Pos = 20
    failed_join_window_s: Pos = 900
    failed_joins_total_per_window: Pos = 1000
    registrations_per_minute: Pos = 1200
    reads_per_minute: Pos = 6000
    max_content_bytes: Pos = 262_144
    max_members_per_thread: Pos = 10_000
    max_threads_per_agent: Pos = 10_000
    # Capacity per agent (D240): the bytes of facts an agent's actions recorded
    # in all, at most the smaller of these two (where the store has a size).
    max_bytes_per_agent: Bytes0 = 1_073_741_824
    max_store_percent_per_agent: Percent = 10


class DefaultsConfig(_Section, frozen=True):
    deliver_within_s: Within = 86_400
    judge_within_s: Within = 86_400


class WebhooksConfig(_Section, frozen=True):
    # Hosts and ports a webhook may reach although they are loopback, private or
    # link-local, and over http:// (WIRE.md 1.2; D328): "host:port" allows that
    # port, "host:*" every port (tests, development), a bare "host" only the
    # scheme's default port (80 for http://, 443 for https://).
    allow_hosts: tuple[str, ...] = ()
    # POSTs in flight at once across all agents (each agent has at most one).
    concurrency: Pos = 16
    # For tests and benchmarks only: the pauses between attempts and how long
    # an endpoint fails before it is disabled (the wire contract's defaults).
    retry_pauses_s: Annotated[tuple[Annotated[float, msgspec.Meta(gt=0)], ...], msgspec.Meta(min_length=1)] = (
        1, 5, 30, 120, 600, 1800,
    )
    disable_after_s: Annotated[float, msgspec.Meta(gt=0)] = 86_400


class TracingConfig(_Section, frozen=True):
    # WIRE.md 1.3 "Tracing": the OTLP/HTTP base URL (as OTEL_EXPORTER_OTLP_ENDPOINT;
    # spans go to <endpoint>/v1/traces). Empty: no tracing, and nothing of
    # OpenTelemetry is imported. Needs the tracing extra (pip install 'kungfud[tracing]').
    otlp_endpoint: str = ""
    # The share of traces started here that are kept; a request that comes with
    # a trace context follows its parent's decision (parent-based sampling).
    sample_ratio: Annotated[float, msgspec.Meta(ge=0, le=1)] = 1.0


class A2AConfig(_Section, frozen=True):
    """WIRE.md 1.3 "A2A": the Agent2Agent endpoint and its defaults."""

    enabled: bool = True
    # HOST:PORT; "" = the websocket listen host with the next port (port 0 when
    # the websocket port is 0): see Config.a2a_listen.
    listen: str = ""
    # The base the cards advertise; "" = http://<listen>.
    public_url: str = ""
    block_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 30
    auto_adopt_s: Within = 5
    push_configs_per_task: Annotated[int, msgspec.Meta(ge=0, le=100)] = 5


class Config(_Section, frozen=True):
    server: ServerConfig = ServerConfig()
    storage: StorageConfig = StorageConfig()
    limits: LimitsConfig = LimitsConfig()
    defaults: DefaultsConfig = DefaultsConfig()
    webhooks: WebhooksConfig = WebhooksConfig()
    tracing: TracingConfig = TracingConfig()
    a2a: A2AConfig = A2AConfig()

    @property
    def data_dir(self) -> str:
        return self.storage.data_dir or default_data_dir()

    def listen_addr(self) -> tuple[str, int]:
        return parse_listen(self.server.listen)

    def a2a_listen(self) -> tuple[str, int]:
        """``[a2a] listen``, or the websocket host with the next port (0 when
        the websocket port is 0: a free one)."""
        if self.a2a.listen:
            return parse_listen(self.a2a.listen)
        host, port = self.listen_addr()
        return host, (port + 1 if port else 0)

    def a2a_public_url(self) -> str:
        """``[a2a] public_url``, or ``http://<listen>`` (no trailing slash)."""
        if self.a2a.public_url:
            return self.a2a.public_url.rstrip("/")
        host, port = self.a2a_listen()
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"


class ConfigError(ValueError):
    pass


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"listen address {text!r} must be HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def _unknown_key(raw: dict) -> str | None:
    """The first key the daemon does not know, named with the closest known one
    ("did you mean …?"); the echoed name is cut like all echoed text."""
    from .errors import echo

    def suggest(name: str, known: list[str]) -> str:
        close = difflib.get_close_matches(name, known, n=1)
        return f"; did you mean `{close[0]}`?" if close else ""

    sections = {f: getattr(Config(), f) for f in Config.__struct_fields__}
    for section, table in raw.items():
        if section not in sections:
            return f"unknown section `{echo(section)}`" + suggest(section, sorted(sections))
        if not isinstance(table, dict):
            continue  # a wrong type is reported by the conversion, with its path
        fields = list(type(sections[section]).__struct_fields__)
        for key in table:
            if key not in fields:
                return f"unknown key `{echo(key)}` in [{section}]" + suggest(key, fields)
    return None


def load(
    path: str | None = None, *, data_dir: str | None = None, listen: str | None = None, store: str | None = None
) -> Config:
    raw: dict = {}
    if path is not None:
        try:
            with open(path, "rb") as f:
                raw = tomllib.load(f)
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
    if (unknown := _unknown_key(raw)) is not None:
        raise ConfigError(f"config file {path}: {unknown}")
    try:
        cfg = msgspec.convert(raw, Config)
    except msgspec.ValidationError as e:
        raise ConfigError(f"config file {path}: {e}") from None
    if data_dir is not None:
        cfg = msgspec.structs.replace(cfg, storage=msgspec.structs.replace(cfg.storage, data_dir=data_dir))
    if listen is not None:
        cfg = msgspec.structs.replace(cfg, server=msgspec.structs.replace(cfg.server, listen=listen))
    if store is not None:
        cfg = msgspec.structs.replace(cfg, storage=msgspec.structs.replace(cfg.storage, url=store))
    cfg.listen_addr()  # validate
    _check_allow_hosts(cfg.webhooks.allow_hosts)
    cfg.a2a_listen()
    check_store_url(cfg.storage.url)
    return cfg


def _check_allow_hosts(entries: tuple[str, ...]) -> None:
    from .conventions import allow_entry

    for entry in entries:
        if allow_entry(entry) is None:
            raise ConfigError(
                f"[webhooks] allow_hosts entry {entry!r} must be HOST, HOST:PORT, [IPV6]:PORT or HOST:* "
                "(no scheme, path or user)"
            )
