"""Derive kungfud/console/confusables.json from Unicode's confusables.txt
(UTS #39; https://www.unicode.org/Public/security/latest/confusables.txt):
``python docs/gen_confusables.py PATH/TO/confusables.txt``.

Kept: the entries whose prototype is printable ASCII and whose source NFKC
leaves unchanged (the skeleton applies NFKC first; kungfud/wire/names.py).
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "kungfud" / "console" / "confusables.json"


def derive(text: str) -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        src, dst, _ = (x.strip() for x in line.split(";"))
        s = "".join(chr(int(c, 16)) for c in src.split())
        d = "".join(chr(int(c, 16)) for c in dst.split())
        if all(32 < ord(c) < 127 for c in d) and unicodedata.normalize("NFKC", s) == s:
            rows[s] = d
    return rows


if __name__ == "__main__":
    table = derive(Path(sys.argv[1]).read_text(encoding="utf-8-sig"))
    OUT.write_text(json.dumps(table, ensure_ascii=True, sort_keys=True, separators=(",", ":")))
    print(f"{len(table)} entries -> {OUT}")
