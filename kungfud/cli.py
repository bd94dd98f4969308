"""``kungfud`` command line: ``serve``, ``check``, ``backup``, ``migrate`` and ``mcp``."""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .config import ConfigError, load

__all__ = ["main"]


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of processes, 1 or more, or auto; not {text[:40]!r}")
    return int(text)


def _command(argv: list[str] | None) -> str | None:
    """The subcommand named on the command line (its first word that is not an option)."""
    return next((a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")), None)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; ``mcp``'s options only when ``command`` is mcp
    (they import the bridge and the client, which serving does not need)."""
    p = argparse.ArgumentParser(prog="kungfud", description="Kungfu protocol daemon")
    p.add_argument("--version", action="version", version=f"kungfud {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the daemon")
    s.add_argument("--config", help="TOML config file (every key optional)")
    s.add_argument("--data-dir", help="data directory (overrides the config)")
    s.add_argument("--listen", help="HOST:PORT to listen on; port 0 picks a free one")
    s.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    s.add_argument("--log-format", choices=("text", "json"), default="text", help="text for people, json for collectors")
    s.add_argument("--workers", type=_workers, help="processes serving the data directory on one port (default 1; auto: one per core)")
    s.add_argument("--worker", help=argparse.SUPPRESS)  # internal: a worker of --workers N (kungfud.worker)
    s.add_argument("--store", help="the store: lmdb (default, under --data-dir) or postgresql://USER@HOST:PORT/DB")
    c = sub.add_parser("check", help="rebuild every derived index from the facts and report differences")
    c.add_argument("--config")
    c.add_argument("--data-dir")
    c.add_argument("--rebuild", action="store_true", help="write the rebuilt indexes (daemon must be stopped)")
    c.add_argument("--store", help="the store to check: lmdb (under --data-dir) or postgresql://…")
    b = sub.add_parser("backup", help="hot, consistent, compacted copy of the data directory's store")
    b.add_argument("dest", help="an empty directory to write the backup into")
    b.add_argument("--config")
    b.add_argument("--data-dir")
    b.add_argument("--store", help=argparse.SUPPRESS)  # a PostgreSQL store is backed up with pg_dump
    m = sub.add_parser("migrate", help="copy a stopped LMDB data directory's store into an empty PostgreSQL store")
    m.add_argument("--to", required=True, metavar="URL", help="postgresql://USER@HOST:PORT/DB of an empty database")
    m.add_argument("--config")
    m.add_argument("--data-dir")
    # --- mcp: MCP server (stdio, or --http) bridging to a running daemon (optional extra `mcp`) ---
    mcp = sub.add_parser("mcp", help="MCP server (stdio, or --http) exposing the daemon's ops as tools (needs the mcp extra)")
    if command == "mcp":
        from .mcp import add_arguments as mcp_arguments  # does not import the MCP SDK

        mcp_arguments(mcp)
    # --- end mcp ---
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser(_command(argv)).parse_args(argv)
    if args.cmd == "mcp":  # needs no config or data directory; imports the MCP SDK lazily
        from .mcp import main as mcp_main

        return mcp_main(args)
    try:
        cfg = load(
            args.config, data_dir=args.data_dir, listen=getattr(args, "listen", None), store=getattr(args, "store", None)
        )
    except ConfigError as e:
        print(f"kungfud: {e}", file=sys.stderr)
        return 2
    if args.cmd == "serve":
        if cfg.tracing.otlp_endpoint:  # WIRE.md 1.3: with the setting and without the extra, no start
            from .tracing import missing

            if (why := missing()) is not None:
                print(f"kungfud: {why}", file=sys.stderr)
                return 2
        from .daemon import run
        from .logs import setup

        setup(str(args.log_level), args.log_format, cfg.server.log_queue)
        if args.worker is not None:
            from .worker import run as run_worker

            return run_worker(args.worker)
        from .supervisor import run as supervise, worker_count

        n = worker_count(args.workers if args.workers is not None else cfg.server.workers)
        if n > 1:
            from .store.open import is_pg_url

            if is_pg_url(cfg.storage.url):  # D234: workers share one LMDB file; PostgreSQL nodes are separate serves
                print(
                    "kungfud: --workers applies to an LMDB store only; with PostgreSQL run one `kungfud serve` "
                    "per node, each with its own data directory (docs/storage.md \"PostgreSQL\")",
                    file=sys.stderr,
                )
                return 2
            return supervise(cfg, n, ["--log-level", str(args.log_level), "--log-format", args.log_format])
        return run(cfg)
    if args.cmd == "backup":
        from .backup import run_backup

        return run_backup(cfg.data_dir, args.dest, url=cfg.storage.url)
    if args.cmd == "migrate":
        from .store.open import is_pg_url

        if not is_pg_url(args.to):
            print("kungfud migrate: --to must be a PostgreSQL URL postgresql://USER@HOST:PORT/DB", file=sys.stderr)
            return 2
        from .store.postgres.migrate import run_migrate

        return run_migrate(cfg.data_dir, args.to, map_size_mb=cfg.storage.map_size_mb)
    from .store.check import run_check

    return run_check(cfg.data_dir, rebuild=args.rebuild, map_size_mb=cfg.storage.map_size_mb, url=cfg.storage.url)


if __name__ == "__main__":
    sys.exit(main())
