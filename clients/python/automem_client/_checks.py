"""Checks of the caller's arguments, made before either transport builds a request, so a
wrong type is the same :class:`~automem_client.errors.InvalidArgument` naming the argument
over gRPC and REST (a string for ``tags`` was split into one-letter tags; ``store(123)``
was a TypeError over gRPC and a 400 over REST; a ``date`` for ``t_valid`` an
AttributeError). Values of the right type are left to the service, which checks ranges and
words the same way for both.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from numbers import Real
from typing import Any

from automem_client import errors


def _refuse(field: str, wanted: str, value: Any) -> errors.InvalidArgument:
    return errors.InvalidArgument(f"{field}: must be {wanted}, not {type(value).__name__}", field=field)


def _unicode(value: str, field: str) -> None:
    """``value`` can be sent (UTF-8): a lone surrogate (``"\\ud800"``) was a bare
    UnicodeEncodeError over both transports (break-it review)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise errors.InvalidArgument(f"{field}: not valid Unicode text (a lone surrogate at character {exc.start})",
                                     field=field) from None


def text(value: Any, field: str) -> None:
    """``value`` is a str that UTF-8 can carry (no lone surrogate)."""
    if not isinstance(value, str):
        raise _refuse(field, "a string", value)
    _unicode(value, field)


def header(value: Any, field: str) -> None:
    """``value`` is a str of printable ASCII (``" "`` to ``"~"``): it travels in a header
    (the key, the scope, an idempotency key), which gRPC metadata and HTTP carry only so. A
    non-ASCII key was a bare ExecuteBatchError over gRPC and a UnicodeEncodeError over REST,
    a newline one retried there as an outage (break-it review). The value is not echoed
    (it may be a credential)."""
    if not isinstance(value, str):
        raise _refuse(field, "a string", value)
    for i, char in enumerate(value):
        if not " " <= char <= "~":
            raise errors.InvalidArgument(f"{field}: must be printable ASCII (it is sent as a header); character "
                                         f"{i} is {'a control character' if char.isascii() else 'not ASCII'}",
                                         field=field)


#: The longest idempotency key the service takes (characters): its ``IDEMPOTENCY_KEY_MAX_LENGTH``
#: (automem/common/model.py).
IDEMPOTENCY_KEY_MAX_LENGTH = 255


def idempotency_key(value: Any, field: str = "idempotency_key") -> None:
    """``value`` is None or a header value (:func:`header`) of at most
    :data:`IDEMPOTENCY_KEY_MAX_LENGTH` characters, with the service's words: over REST a
    longer one was refused naming the header (``idempotency-key``, field None), over gRPC
    naming ``idempotency_key`` (break-it review)."""
    if value is None:
        return
    header(value, field)
    if len(value) > IDEMPOTENCY_KEY_MAX_LENGTH:
        raise errors.InvalidArgument(f"{field}: at most {IDEMPOTENCY_KEY_MAX_LENGTH} characters (got {len(value)})",
                                     field=field)


#: The relation types a supersede may write, old -> new (the service's
#: ``SUPERSEDING_RELATIONS``, automem/common/lifecycle.py).
SUPERSEDE_RELATIONS = ("INVALIDATED_BY", "EVOLVED_INTO")


def supersede_relation(value: Any, field: str = "relation") -> str:
    """The relation type ``value`` names (any case, with or without ``RELATION_TYPE_``):
    one of :data:`SUPERSEDE_RELATIONS`, else InvalidArgument naming ``field`` and listing
    them. ``""`` too: it was refused over gRPC and taken as INVALIDATED_BY over REST, and
    ``"REPLACES"`` named ``relation`` over gRPC, ``supersede_relation`` over REST, both
    listing every relation type (break-it review)."""
    text(value, field)
    word = value.strip().upper().removeprefix("RELATION_TYPE_")
    if word not in SUPERSEDE_RELATIONS:
        raise errors.InvalidArgument(f"{field}: must be {' or '.join(SUPERSEDE_RELATIONS)} (got {value!r})",
                                     field=field)
    return word


def attempts(value: Any, field: str = "max_attempts") -> None:
    """``value`` is an int of at least 1 (1 = no retry): ``"a"`` was a bare TypeError, 0 and
    -3 were taken as 1 (break-it review)."""
    integer(value, field, least=1)


def identifier(value: Any, field: str) -> None:
    """``value`` is a str that is not blank: a memory id. An empty one read every memory's
    history over gRPC (the service refuses it now) and was a 404 of another route over REST."""
    text(value, field)
    if not value.strip():
        raise errors.InvalidArgument(f"{field}: required (not empty)", field=field)


#: The longest memory id the service takes (characters; ids are 36-character UUIDs): the
#: service's ``ID_MAX_LENGTH`` (automem/common/model.py ``check_id``).
MEMORY_ID_MAX_LENGTH = 128


def memory_id(value: Any, field: str = "memory_id") -> None:
    """``value`` is a memory id the service could hold, checked as the service checks it
    (automem/common/model.py ``check_id``): a str that is not blank, of at most
    :data:`MEMORY_ID_MAX_LENGTH` characters, with no control character (NUL, newline, tab,
    DEL). The service refuses such an id naming its proto field (``id``) over gRPC and the
    path parameter over REST; the client names the argument over both. The id is not echoed."""
    identifier(value, field)
    if "\x00" in value:
        raise errors.InvalidArgument(f"{field}: contains a NUL character", field=field)
    if len(value) > MEMORY_ID_MAX_LENGTH:
        raise errors.InvalidArgument(f"{field}: too long ({len(value)} characters; an id has at most "
                                     f"{MEMORY_ID_MAX_LENGTH})", field=field)
    for i, char in enumerate(value):
        if unicodedata.category(char) == "Cc":
            raise errors.InvalidArgument(f"{field}: contains a control character (U+{ord(char):04X} at character "
                                         f"{i}); an id has none", field=field)


def memory_ids(value: Any, field: str) -> None:
    """``value`` is a list of str (:func:`texts`) each of which, unless blank (a blank item
    names nothing: the service skips it), is a memory id the service could hold
    (:func:`memory_id`), as the service checks an id list (automem/common/model.py
    ``check_ids``): an item at fault is refused naming ``<field>[<index>]``
    (``priority_ids[3]``), not echoed."""
    texts(value, field)
    for i, item in enumerate(value):
        if item.strip():
            memory_id(item, f"{field}[{i}]")


def texts(value: Any, field: str) -> None:
    """``value`` is a sequence of str and not one str (whose letters would be the items)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | set | frozenset):
        raise _refuse(field, "a list of strings", value)
    for i, item in enumerate(value):
        text(item, f"{field}[{i}]")


def number(value: Any, field: str) -> None:
    """``value`` is None or a finite real number (a bool is not one)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, Real):
        raise _refuse(field, "a number", value)
    if not math.isfinite(float(value)):
        raise errors.InvalidArgument(f"{field}: must be a finite number", field=field)


def integer(value: Any, field: str, *, least: int | None = None, most: int | None = None, bits: int = 32) -> None:
    """``value`` is None or an int (not a bool), at least ``least`` and at most ``most`` when
    given, and held by the request's signed ``bits``-bit field (``int32`` limits and sizes,
    ``int64`` versions, etags and sequences; protos/automem/v1): over gRPC protobuf raised a
    bare ValueError for one it cannot hold, where REST answered InvalidArgument naming the
    field. ``most``: the service's documented bound, checked here where the service names or
    words the refusal differently per transport (``related(limit=201)`` was named
    ``page_size`` over gRPC)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(field, "an integer", value)
    if least is not None and value < least:
        raise errors.InvalidArgument(f"{field}: must be at least {least}", field=field)
    if most is not None and value > most:
        wanted = f"between {least} and {most}" if least is not None else f"at most {most}"
        raise errors.InvalidArgument(f"{field}: must be {wanted}", field=field)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not low <= value <= high:
        raise errors.InvalidArgument(f"{field}: must be between {low} and {high}", field=field)


def flag(value: Any, field: str) -> None:
    """``value`` is a bool (or None: the service's default)."""
    if value is not None and not isinstance(value, bool):
        raise _refuse(field, "True or False", value)


def time(value: Any, field: str) -> None:
    """``value`` is None, a datetime (naive = UTC) or ISO 8601 text (a ``date`` or an epoch
    number is not one: which instant of the day, which unit?). What the text means (naive
    text and dates in the call's zone) is automem_client/_times.py's."""
    if value is not None and not isinstance(value, datetime | str):
        raise _refuse(field, "a datetime or ISO 8601 text", value)


def mapping(value: Any, field: str) -> None:
    """``value`` is None or a JSON object: a mapping with str keys whose values are JSON
    (:func:`json_value`)."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise _refuse(field, "a dict (a JSON object)", value)
    for key, item in value.items():
        if not isinstance(key, str):
            raise _refuse(f"{field} key", "a string", key)
        _unicode(key, f"{field} key")
        json_value(item, f"{field}.{key}")


def json_value(value: Any, field: str) -> None:
    """``value`` is JSON: None, a bool, an int, a finite float, a str, a list or tuple of
    JSON, or a JSON object; the field of a bad one is named as the service names it
    (``metadata.a.b[0]``). A NaN was InvalidArgument over gRPC and a bare ValueError of the
    JSON encoder over REST; a datetime or bytes a bare TypeError over both."""
    if isinstance(value, str):
        _unicode(value, field)
        return
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise errors.InvalidArgument(f"{field}: must be a finite number (JSON has no NaN or infinity)",
                                         field=field)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            json_value(item, f"{field}[{i}]")
        return
    if isinstance(value, Mapping):
        mapping(value, field)
        return
    raise _refuse(field, "a JSON value (None, bool, number, string, list or dict)", value)


def memory_input(item: Any, prefix: str = "") -> None:
    """Each field of a :class:`~automem_client.models.MemoryInput` (``prefix`` names the
    item of a batch, e.g. ``memories[3].``)."""
    text(item.content, f"{prefix}content")
    texts(item.tags, f"{prefix}tags")
    number(item.importance, f"{prefix}importance")
    number(item.confidence, f"{prefix}confidence")
    if item.type is not None:
        text(item.type, f"{prefix}type")
    mapping(item.metadata, f"{prefix}metadata")
    for name in ("timestamp", "t_valid", "t_invalid"):
        time(getattr(item, name), f"{prefix}{name}")
    if item.embedding is not None:
        if isinstance(item.embedding, (str, bytes)) or not isinstance(item.embedding, Sequence):
            raise _refuse(f"{prefix}embedding", "a list of numbers", item.embedding)
        for i, value in enumerate(item.embedding):
            number(value, f"{prefix}embedding[{i}]")
    flag(item.require_review, f"{prefix}require_review")


def timeout(value: Any, field: str = "timeout") -> None:
    """``value`` is None (no deadline / the client's default) or a finite number of seconds
    above 0 (a bool is not one): ``inf`` was an immediate DeadlineExceeded over gRPC, ``nan``
    a bare ValueError over REST and ``"5"`` a TypeError over both (break-it review)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, Real):
        raise _refuse(field, "a number of seconds", value)
    if not math.isfinite(float(value)) or value <= 0:
        raise errors.InvalidArgument(f"{field}: must be a finite number of seconds above 0 (None: no deadline)",
                                     field=field)


def base_url(value: Any, field: str = "base_url") -> None:
    """``value`` is an http:// or https:// URL with a host: ``Client.rest("localhost:8001")``
    was retried for 1.4 s and reported Unavailable, a usage error taken for an outage."""
    text(value, field)
    from urllib.parse import urlsplit

    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise errors.InvalidArgument(f"{field}: must be an http:// or https:// URL with a host, e.g. "
                                     f"http://localhost:8001 (got {value!r})", field=field)
