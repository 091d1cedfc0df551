"""The ``query`` parameter of list endpoints: a case-insensitive substring match."""

from __future__ import annotations


def search_pattern(query: str | None) -> str | None:
    """An ILIKE pattern matching ``query`` anywhere (wildcards in it are literal), or None if blank."""
    text = (query or "").strip()
    if not text:
        return None
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
