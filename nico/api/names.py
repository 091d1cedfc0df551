"""The character rule of every resource's name and description, as a check and as the OpenAPI pattern.

Refused anywhere in a name or a description: C0 and C1 control characters (a terminal would run an
ANSI escape a tenant named a partition with), the Unicode line and paragraph separators, and the
bidirectional formatting characters (an override makes ``abc`` render as ``cba`` in every list that
shows the name). A description may hold tabs and line breaks. A name must also begin with a visible
character (not whitespace, not a zero-width or other invisible one) and must not end with whitespace:
a name made only of whitespace or invisible characters names nothing a person can tell apart.

The same character classes build the check (Python ``re``) and the JSON Schema pattern (ECMA-262), so
the document and the server cannot disagree.
"""

from __future__ import annotations

import re

# Character-class bodies, written with \\u escapes both regex dialects read alike.
CONTROLS = "\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029"
DESCRIPTION_CONTROLS = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f\\u2028\\u2029"
BIDI = "\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069"
INVISIBLE = (
    "\\u00ad\\u034f\\u115f\\u1160\\u17b4\\u17b5\\u180e\\u200b-\\u200d\\u2060-\\u2064\\u3164\\ufeff\\uffa0"
)

# A name: a visible first character, no control or bidi character, no whitespace at the end.
NAME_PATTERN = f"^[^\\s{CONTROLS}{BIDI}{INVISIBLE}]([^{CONTROLS}{BIDI}]*[^\\s{CONTROLS}{BIDI}])?$"
DESCRIPTION_PATTERN = f"^[^{DESCRIPTION_CONTROLS}{BIDI}]*$"

CONTROL_TEXT = "must not contain control characters"
BIDI_TEXT = "must not contain bidirectional text controls"
INVISIBLE_TEXT = "must begin with a visible character"

_CONTROL = re.compile(f"[{CONTROLS}]")
_DESCRIPTION_CONTROL = re.compile(f"[{DESCRIPTION_CONTROLS}]")
_BIDI = re.compile(f"[{BIDI}]")
_INVISIBLE = re.compile(f"[{INVISIBLE}]")


def name_characters_problem(value: str) -> str | None:
    """Why ``value`` (a name of the right length, without edge whitespace) is refused, or None."""
    if _CONTROL.search(value):
        return CONTROL_TEXT
    if _BIDI.search(value):
        return BIDI_TEXT
    if _INVISIBLE.match(value):
        return INVISIBLE_TEXT
    return None


def description_characters_problem(value: str) -> str | None:
    """Why the description ``value`` is refused, or None."""
    if _DESCRIPTION_CONTROL.search(value):
        return CONTROL_TEXT
    if _BIDI.search(value):
        return BIDI_TEXT
    return None
