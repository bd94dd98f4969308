"""Results, events and errors as a person reads them (``--json`` prints the
exact objects instead). Participant content is printed as JSON, never mixed
into the protocol fields (L6)."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any, Callable

from .exits import EXIT_CODES

__all__ = ["render", "render_event", "Out"]

def _scalar(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return str(v)


def _ref(ref: dict) -> str:
    """A ref as turn prints it: th_…#3, th_…/as_…, tk_…/en_…"""
    if "entry" in ref and "thread" in ref:
        return f"{ref['thread']}#{ref['entry']}"
    return "/".join(str(v) for v in ref.values())


def _inline(d: dict) -> str:
    parts = []
    for k, v in d.items():
        if isinstance(v, dict) and set(v) <= {"memory", "version"} and "memory" in v:
            parts.append(f"{k}={v['memory']}@{v.get('version', '-')}")
        elif isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
            parts.append(f"{k}={','.join(map(_scalar, v)) or '-'}")
        elif isinstance(v, list):
            parts.append(f"{k}=[{'; '.join(_inline(x) if isinstance(x, dict) else _scalar(x) for x in v)}]")
        elif isinstance(v, dict) and k != "content":
            parts.append(f"{k}=({_inline(v)})")
        else:
            parts.append(f"{k}={_scalar(v)}")
    return " ".join(parts)


def _content_block(v: Any, pad: str) -> list[str]:
    """``content: {…}`` on one line when short, else indented JSON below."""
    one = json.dumps(v, ensure_ascii=False)
    if len(one) <= 100:
        return [f"{pad}content: {one}"]
    return [f"{pad}content:"] + [pad + "  " + line for line in json.dumps(v, indent=2, ensure_ascii=False).splitlines()]


def _fields(d: dict, pad: str = "") -> list[str]:
    """A working set or receipt, one field a line; participant content is
    printed as JSON, never mixed into the protocol fields (L6)."""
    out: list[str] = []
    for k, v in d.items():
        if k == "content":
            out += _content_block(v, pad)
        elif isinstance(v, dict):
            if "content" in v or any(isinstance(x, (dict, list)) for x in v.values()):
                out.append(f"{pad}{k}:")
                out += _fields(v, pad + "  ")
            elif set(v) <= {"memory", "version"} and "memory" in v:
                out.append(f"{pad}{k}: {v['memory']}@{v.get('version', '-')}")
            else:
                out.append(f"{pad}{k}: {_inline(v)}")
        elif isinstance(v, list) and any(isinstance(x, dict) for x in v):
            out.append(f"{pad}{k}:")
            for x in v:
                if isinstance(x, dict) and "content" in x:
                    rest = {kk: vv for kk, vv in x.items() if kk != "content"}
                    out.append(f"{pad}  - {_inline(rest)}")
                    out += _content_block(x["content"], pad + "    ")
                else:
                    out.append(f"{pad}  - {_inline(x) if isinstance(x, dict) else _scalar(x)}")
        elif isinstance(v, list):
            out.append(f"{pad}{k}: {', '.join(map(_scalar, v)) if v else '-'}")
        else:
            out.append(f"{pad}{k}: {_scalar(v)}")
    return out


def _turn_line(it: dict) -> str:
    due = f" due={it['due']}" if it.get("due") else ""
    return f"{it['obligation_id']} {it['obligation']} {_ref(it.get('ref', {}))} next={it.get('next', '-')}{due}"


def _opportunity_line(it: dict) -> str:
    ref = it.get("ref", {})
    if it.get("opportunity") == "assignment":
        extra = {k: v for k, v in it.items() if k not in ("opportunity", "ref")}
        return f"assignment {_ref(ref)} {_inline(extra)}".rstrip()
    extra = {k: v for k, v in it.items() if k not in ("opportunity", "ref")}
    return f"{it.get('opportunity', '?')} {_ref(ref)} {_inline(extra)}".rstrip()


def _outcome_line(it: dict) -> str:
    """``th_…/as_… rejected at=… by=ag_… content={"reason":…}``: the judge's
    content stays JSON on the one line (its text can never start a new line)."""
    head = f"{_ref(it.get('ref', {}))} {it.get('state', '?')} at={it.get('at', '-')}"
    if it.get("by"):
        head += f" by={it['by']}"
    if "content" in it:
        head += f" content={_scalar(it['content'])}"
    return head


def _memory_line(it: dict) -> str:
    return f"{it['memory']} v{it.get('latest')} {it.get('visibility')} {it.get('status')} by {it.get('author')}"


def _thread_line(it: dict) -> str:
    return f"{it['thread']} {it.get('role')} {it.get('status')} entries={it.get('entries')}"


def _task_line(it: dict) -> str:
    limit = it.get("adoption_limit")
    state = "accepting" if it.get("accepting") else "paused"
    return (
        f"{it['task']} by {it.get('author')} {it.get('audience')} v{it.get('contract_version')} {state} "
        f"adoptions={it.get('adoptions')}/{limit if limit is not None else '-'}"
    )


def _entry_lines(it: dict) -> list[str]:
    head = {k: v for k, v in it.items() if k not in ("entry", "author", "at", "content")}
    out = [f"#{it['entry']} {it.get('author')} {it.get('at')}", f"  {_inline(head)}"]
    if "content" in it:
        out += _content_block(it["content"], "  ")
    return out


def _search_lines(it: dict) -> list[str]:
    """``entry th_…#3 at=… score=…`` (the ids that read it), then the snippet on its own line."""
    kind = it.get("kind", "?")
    if kind == "entry":
        where = f"{it.get('thread')}#{it.get('entry')}"
    elif kind == "memory":
        where = f"{it.get('memory')}@{it.get('version')}"
    else:
        where = "/".join(str(it[k]) for k in ("thread", "task", "assignment", "engagement") if k in it)
    return [f"{kind} {where} at={it.get('at')} score={it.get('score')}", f"  {_scalar(it.get('snippet', ''))}"]


_ITEM_LINES: dict[str, Callable[[dict], str | list[str]]] = {
    "turn": _turn_line,
    "opportunities": _opportunity_line,
    "outcomes": _outcome_line,
    "memory.list": _memory_line,
    "thread.list": _thread_line,
    "task.list": _task_line,
    "thread.entries": _entry_lines,
    "search": _search_lines,
}


def render(op: str, result: Any) -> list[str]:
    """Human-readable lines for the result of ``op``."""
    if isinstance(result, dict) and set(result) == {"items", "cursor"} and isinstance(result["items"], list):
        line = _ITEM_LINES.get(op, _inline)
        out: list[str] = []
        for it in result["items"]:
            got = line(it) if isinstance(it, dict) else _scalar(it)
            out += got if isinstance(got, list) else [got]
        if not result["items"]:
            out.append("(none)")
        return out
    if isinstance(result, dict):
        return _fields(result)
    return [_scalar(result)]


def render_event(msg: dict) -> list[str]:
    seq, kind, data = msg.get("seq"), msg.get("event"), msg.get("data") or {}
    if kind == "turn":
        out = [f"{seq} turn +{_turn_line(it)}" for it in data.get("added", [])]
        out += [f"{seq} turn -{it.get('obligation_id')} {it.get('why')}" for it in data.get("ended", [])]
        return out or [f"{seq} turn (no change)"]
    if kind == "opportunity":
        return [f"{seq} opportunity {_opportunity_line(data)}"]
    if kind == "outcome":
        return [f"{seq} outcome {_outcome_line(data)}"]
    if kind == "a2a_task":
        return [f"{seq} a2a_task {data.get('task')} {data.get('state')} generation {data.get('generation')}"]
    if kind == "task_offered":
        return [f"{seq} task_offered {data.get('task')} by {data.get('author')} v{data.get('contract_version')}"]
    return [f"{seq} {kind} {_scalar(data)}"]


def _hint_command(hint: dict) -> str:
    return "kungfu call " + hint.get("op", "?") + " --args " + shlex.quote(json.dumps(hint.get("args", {})))


class Out:
    """Where results and errors go; ``--json`` prints exact objects on stdout."""

    def __init__(self, as_json: bool, ids: bool = False):
        self.as_json = as_json
        self.ids = ids  # agents as ids only, no names (and no reads for them)

    def result(self, op: str, result: Any) -> None:
        if self.as_json:
            print(json.dumps(result, ensure_ascii=False), flush=True)
            return
        for line in render(op, result):
            print(line)
        sys.stdout.flush()
        if isinstance(result, dict) and result.get("cursor") is not None and "items" in result:
            self.note(f"more: add --cursor {shlex.quote(str(result['cursor']))} (or --all)")

    def note(self, text: str) -> None:
        print(f"kungfu: {text}", file=sys.stderr)

    def error(self, error: dict, said=None) -> int:
        """Print a rejection (daemon's or the CLI's own); return its exit code.
        ``said`` rewrites the reason for the human line (``--json`` prints it exact)."""
        code = error.get("code", "internal")
        if self.as_json:
            print(json.dumps(error, ensure_ascii=False), flush=True)
        reason = error.get("reason", "")
        print(f"{code}: {said(reason) if said else reason} (next: {error.get('next', '-')})", file=sys.stderr)
        if error.get("hint"):
            print(f"hint: {_hint_command(error['hint'])}", file=sys.stderr)
        return EXIT_CODES.get(code, EXIT_CODES["internal"])
