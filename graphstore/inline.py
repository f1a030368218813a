"""Names shown on one line (ids, file names, tags, sections): as they are when printable,
else JSON-quoted, so a newline or a terminal escape in a file name can neither split one
entry in two nor reach the terminal raw (`graphstore search`, `graphstore prompt`)."""

from __future__ import annotations

import json


def inline(text: str) -> str:
    """`text` as is when it prints on one line, else JSON-quoted."""
    return text if text.isprintable() else json.dumps(text, ensure_ascii=False)
