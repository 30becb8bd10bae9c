"""The REST gateway's JSON body reader (automem/gateway/schemas.py ``parse_json_body``): what
no store keeps as sent — a key given twice, a number no double holds — is a 400 naming the
field's path; what a store keeps exactly (``-0.0`` among it) comes back as sent."""

from __future__ import annotations

import json
import math

import pytest
from fastapi import HTTPException

from automem.gateway.schemas import parse_json_body

TWICE = "the key is given more than once in one object"


def _refused(body: str) -> str:
    with pytest.raises(HTTPException) as err:
        parse_json_body(body)
    assert err.value.status_code == 400
    return err.value.detail


@pytest.mark.parametrize(("body", "path"), [
    ('{"content": "a", "content": "b"}', "content"),
    ('{"metadata": {"x": 1, "x": 1}}', "metadata.x"),
    ('{"metadata": {"a": [{"y": 1}, {"z": 0, "y": 1, "y": 2}]}}', "metadata.a[1].y"),
    ('{"memories": [{"content": "a"}, {"content": "b", "metadata": {"k": {}, "k": []}}]}', "memories[1].metadata.k"),
    ('[{"k": 1}, {"k": 1, "k": 2}]', "[1].k"),
    # The object with the key given twice is named, whatever it holds.
    ('{"a": {"b": 1e-400}, "a": 2}', "a"),
])
def test_a_key_given_twice_is_refused_naming_its_path(body: str, path: str) -> None:
    assert _refused(body).startswith(f"{path}: {TWICE}")
    # Each key once: read as sent.
    assert parse_json_body('{"metadata": {"x": 1, "y": {"x": 2}}, "content": "c"}') == {
        "metadata": {"x": 1, "y": {"x": 2}}, "content": "c"}


@pytest.mark.parametrize("text", ["-0.0", "-0e0", "-0.000", "-0E+5"])
def test_negative_zero_is_read_as_negative_zero(text: str) -> None:
    value = parse_json_body(f'{{"metadata": {{"z": {text}, "l": [{text}]}}}}')["metadata"]
    for number in (value["z"], value["l"][0]):
        assert isinstance(number, float) and number == 0 and math.copysign(1.0, number) < 0
    assert json.dumps(value) == '{"z": -0.0, "l": [-0.0]}'


def test_a_number_that_underflows_or_overflows_is_refused_naming_its_path() -> None:
    assert _refused('{"metadata": {"x": 1e-400}}').startswith(
        "metadata.x: 1e-400 cannot be held exactly by a 64-bit float (it would read back as 0.0)")
    assert _refused('{"metadata": {"x": [-1e-400]}}').startswith(
        "metadata.x[0]: -1e-400 cannot be held exactly by a 64-bit float (it would read back as -0.0)")
    assert _refused('{"importance": 1e400}').startswith("importance: 1e400 cannot be held exactly")
    assert parse_json_body('{"x": 5e-324}') == {"x": 5e-324}
