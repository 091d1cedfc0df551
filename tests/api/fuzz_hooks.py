"""schemathesis hooks for the API fuzz test, loaded by the configuration ``fuzzing.config_text`` writes."""

from __future__ import annotations

from typing import Any

import schemathesis

_EXACT = 2**53  # past this no float spells an integer exactly (schemathesis stops there too)


def as_json_integers(value: Any) -> Any:
    """``value`` with every whole float (``2.0``) written as the integer it is."""
    if isinstance(value, float) and value.is_integer() and -_EXACT <= value <= _EXACT:
        return int(value)
    if isinstance(value, list):
        return [as_json_integers(item) for item in value]
    if isinstance(value, dict):
        return {key: as_json_integers(item) for key, item in value.items()}
    return value


@schemathesis.hook
def before_call(context: Any, case: Any, **kwargs: Any) -> None:
    """Integers go on the wire as JSON integers, as clients write them. schemathesis may spell a value
    the document declares ``integer`` as a whole float (``18.0``: the same number to JSON Schema, which
    cannot tell the two apart); nico's binding, like the reference's Go ``encoding/json``, refuses it
    with 400 ``Failed to parse request data``. The OpenAPI document's description states the rule."""
    if isinstance(case.body, dict | list):
        case.body = as_json_integers(case.body)
