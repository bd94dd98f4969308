"""WIRE.md "Configuration": config/kungfud.toml documents every setting with its
built-in default; the daemon needs no file; unknown keys are errors naming them."""

from pathlib import Path

import msgspec
import pytest

from kungfud.config import Config, ConfigError, load

ROOT = Path(__file__).resolve().parent.parent


def _keys(struct: msgspec.Struct, prefix: str = "") -> set[str]:
    out = set()
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if isinstance(value, msgspec.Struct):
            out |= _keys(value, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def test_wire_config_example_file_lists_every_setting_with_its_default():
    documented = load(str(ROOT / "config" / "kungfud.toml"))
    assert documented == Config()  # every value shown is the built-in default
    import tomllib

    raw = tomllib.loads((ROOT / "config" / "kungfud.toml").read_text())
    listed = {f"{section}.{key}" for section, table in raw.items() for key in table}
    assert listed == _keys(Config())  # and every setting is listed


def test_wire_config_unknown_key_is_an_error_naming_it(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("[limits]\nactions_per_minutes = 5\n")
    with pytest.raises(ConfigError, match="actions_per_minutes"):
        load(str(f))


def test_wire_config_unknown_key_or_section_suggests_the_closest_name_cut_to_64(tmp_path):
    """WIRE.md 1.1 "Wording of rejections" (docs/decisions.md D67)."""
    f = tmp_path / "bad.toml"
    f.write_text("[limits]\nactions_per_minutes = 5\n")
    with pytest.raises(ConfigError) as e:
        load(str(f))
    assert str(e.value).endswith("unknown key `actions_per_minutes` in [limits]; did you mean `actions_per_minute`?")
    f.write_text('[servr]\nlisten = "127.0.0.1:1"\n')
    with pytest.raises(ConfigError, match=r"unknown section `servr`; did you mean `server`\?"):
        load(str(f))
    f.write_text("[server]\n" + "q" * 300 + " = 1\n")
    with pytest.raises(ConfigError) as e:
        load(str(f))
    assert "q" * 63 + "…" in str(e.value) and "q" * 64 not in str(e.value) and "did you mean" not in str(e.value)


def test_wire_config_flags_override_the_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[server]\nlisten = "127.0.0.1:9999"\n[storage]\ndata_dir = "/nowhere"\n')
    cfg = load(str(f), data_dir=str(tmp_path), listen="127.0.0.1:0")
    assert cfg.listen_addr() == ("127.0.0.1", 0) and cfg.data_dir == str(tmp_path)


def test_event_loop_choice_falls_back_or_refuses_clearly_without_uvloop(monkeypatch):
    """WIRE.md "Configuration", addition `[server] event_loop` (docs/wire.md):
    "auto" serves on asyncio's loop when uvloop is not installed; "uvloop" then
    refuses to start with a reason that says what to do."""
    import sys

    from kungfud.config import ConfigError
    from kungfud.daemon import loop_factory

    assert loop_factory("asyncio") == (None, "asyncio")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop -> ImportError
    assert loop_factory("auto") == (None, "asyncio")
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        loop_factory("uvloop")


def test_the_storage_url_is_lmdb_or_postgresql_and_anything_else_is_a_clear_error(tmp_path):
    assert load().storage.url == "lmdb"
    assert load(store="postgresql://kf@db:5432/kungfu").storage.url == "postgresql://kf@db:5432/kungfu"
    assert load(store="postgres://kf@db/kungfu").storage.url == "postgres://kf@db/kungfu"
    f = tmp_path / "pg.toml"
    f.write_text('[storage]\nurl = "postgresql://kf@db/k"\n')
    assert load(str(f)).storage.url == "postgresql://kf@db/k"
    assert load(str(f), store="lmdb").storage.url == "lmdb"  # the flag overrides the file
    with pytest.raises(ConfigError, match=r"storage url 'mysql://…' is not a store kungfud can open") as e:
        load(store="mysql://root:secret@db/x")
    assert "secret" not in str(e.value)  # a password is never echoed
