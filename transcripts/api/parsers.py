"""The API's JSON parser: DRF's, refusing a key given twice in any object of the body.

Python's `json` keeps the last value of a repeated key, so
`{"kind": "repair", "kind": "export"}` started an export, where a form or
query field given twice is refused (`serializers.OneValue`). The parser is
the one place every JSON body passes through, so no view can forget it.
"""

from __future__ import annotations

import codecs
import json
from collections import Counter
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.utils.json import strict_constant

from transcripts.api.serializers import OneValue


class _Repeated(Exception):
    """An object of the body gives a key more than once (raised by `_once`)."""


class _Pairs(list[tuple[str, Any]]):
    """An object's (key, value) pairs in the order given, repeats kept."""


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Return the object of `pairs`; raise _Repeated if a key comes twice."""
    data = dict(pairs)
    if len(data) < len(pairs):
        raise _Repeated
    return data


def repeats_of(tree: Any) -> dict[Any, Any]:
    """Return the errors of each key given more than once in `tree`, nested as DRF nests them.

    `tree` is JSON parsed with `_Pairs` for objects. A repeated key maps to
    its message, ["Given 2 times: send it once."]; a key or list index whose
    value holds one maps to that value's errors, {"filter": {"q": [...]}}.
    A repeated key's values are not looked into: it is to be sent once.
    Empty when no key repeats. The walk is iterative: a body nested as
    deep as `json` reads is no deeper for it.
    """
    message = str(OneValue.default_error_messages["repeated"])
    errors: dict[Any, Any] = {}
    stack: list[tuple[tuple[Any, ...], Any]] = [((), tree)]
    while stack:
        path, node = stack.pop()
        children: list[tuple[Any, Any]]
        if isinstance(node, _Pairs):
            counts = Counter(key for key, _ in node)
            children = [(key, value) for key, value in node if counts[key] == 1]
            repeated = {key: count for key, count in counts.items() if count > 1}
        elif isinstance(node, list):
            children = list(enumerate(node))
            repeated = {}
        else:
            continue
        if repeated:
            at = errors
            for step in path:
                at = at.setdefault(step, {})
            for key, count in repeated.items():
                at[key] = [message.format(count=count)]
        stack.extend(((*path, step), child) for step, child in reversed(children))
    return errors


class JSONParser(parsers.JSONParser):
    """Parse a JSON body as DRF does; refuse one that gives a key twice in any object.

    Returns what DRF's parser returns. Raises ParseError (400 `bad_request`)
    for a body that is not JSON, as DRF does, or is nested too deep to read;
    ValidationError (400 `bad_request`) naming each repeated key with its
    path, the shape a form field given twice gets:
    `{"filter": {"q": ["Given 2 times: send it once."]}}`. A body without a
    repeat is read once, by `json`'s C scanner; only a refused one is read
    a second time, to find where its repeats are.
    """

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        # DRF's check that the charset is a text encoding (not bz2_codec); newer than the stubs.
        encoding = parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined]
        parse_constant = strict_constant if self.strict else None
        try:
            text = codecs.getreader(encoding)(stream).read()
            try:
                return json.loads(text, parse_constant=parse_constant, object_pairs_hook=_once)
            except _Repeated:
                tree = json.loads(text, parse_constant=parse_constant, object_pairs_hook=_Pairs)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deep.") from None
        raise ValidationError(repeats_of(tree))
