"""Avro compatibility rules (pure Python; moto's registry does not evaluate compatibility)."""

from __future__ import annotations

import pytest

from operations import avro_compat
from operations.avro_compat import SchemaError, compatibility_problems, parse
from tests.ops.moto_dev_env import schema_with

CURRENT = parse(schema_with())


def backward(new: dict) -> list[str]:
    return compatibility_problems("BACKWARD", parse(new), [CURRENT])


def test_adding_an_optional_field_with_a_default_is_backward_compatible():
    assert backward(schema_with([{"name": "country", "type": ["null", "string"], "default": None}])) == []


def test_adding_a_field_without_a_default_is_refused_with_the_reason():
    problems = backward(schema_with([{"name": "country", "type": "string"}]))
    assert problems == [
        "BACKWARD vs version 1: Event.country: field added without a default, so data written before it cannot "
        'be read (give it a default, e.g. type ["null", ...] with default null)'
    ]


def test_removing_a_field_is_backward_compatible():
    assert backward(schema_with(drop=("currency",))) == []


@pytest.mark.parametrize("old, new", [("int", "long"), ("int", "double"), ("long", "float"), ("float", "double"),
                                      ("string", "bytes"), ("bytes", "string")])
def test_avro_promotions_are_allowed(old, new):
    writer = parse(schema_with([{"name": "n", "type": old}]))
    reader = parse(schema_with([{"name": "n", "type": new}]))
    assert compatibility_problems("BACKWARD", reader, [writer]) == []


@pytest.mark.parametrize("old, new", [("long", "int"), ("double", "long"), ("string", "long"), ("boolean", "string")])
def test_other_type_changes_are_refused(old, new):
    writer = parse(schema_with([{"name": "n", "type": old}]))
    reader = parse(schema_with([{"name": "n", "type": new}]))
    (problem,) = compatibility_problems("BACKWARD", reader, [writer])
    assert f"Event.n: type changed from {old} to {new}, which is not an Avro promotion" in problem


def test_making_an_optional_field_required_is_refused_and_the_reverse_is_allowed():
    (problem,) = backward(schema_with([{"name": "user_id", "type": "string"}], drop=("user_id",)))
    assert "Event.user_id: a value of writer branch null cannot be read as string" in problem
    assert backward(schema_with(retype={"event_type": ["string", "null"]})) == []


def test_forward_full_and_all_modes():
    added_required = parse(schema_with([{"name": "country", "type": "string"}]))
    removed_required = parse(schema_with(drop=("event_type",)))
    # FORWARD: the old schema reads new data. A new required field is fine; removing a required one is not.
    assert compatibility_problems("FORWARD", added_required, [CURRENT]) == []
    assert compatibility_problems("FORWARD", removed_required, [CURRENT]) != []
    assert compatibility_problems("FULL", added_required, [CURRENT]) != []
    # _ALL checks every version, plain modes only the latest.
    v1 = parse(schema_with([{"name": "n", "type": "long"}]))
    v2 = parse(schema_with())  # n removed
    v3 = parse(schema_with([{"name": "n", "type": "int"}]))  # n is back without a default: cannot read v2
    assert compatibility_problems("BACKWARD", v3, [v1, v2]) != []
    v3_default = parse(schema_with([{"name": "n", "type": "int", "default": 0}]))  # reads v2, not v1 (long->int)
    assert compatibility_problems("BACKWARD", v3_default, [v1, v2]) == []
    assert [p.split(":")[0] for p in compatibility_problems("BACKWARD_ALL", v3_default, [v1, v2])] == [
        "BACKWARD vs version 1"]
    assert compatibility_problems("NONE", v3, [v1, v2]) == []
    assert compatibility_problems("DISABLED", v3, [v1]) == [
        "the schema's compatibility is DISABLED: the registry accepts no new versions"]


def test_records_enums_arrays_maps_and_names():
    def with_field(field_type):
        return parse(schema_with([{"name": "f", "type": field_type}]))

    color = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    fewer = {"type": "enum", "name": "Color", "symbols": ["RED"]}
    assert compatibility_problems("BACKWARD", with_field(fewer), [with_field(color)]) == [
        "BACKWARD vs version 1: Event.f: enum symbols ['GREEN'] removed and the enum has no default"]
    assert compatibility_problems("BACKWARD", with_field(fewer | {"default": "RED"}), [with_field(color)]) == []
    assert compatibility_problems("BACKWARD", with_field({"type": "array", "items": "long"}),
                                  [with_field({"type": "array", "items": "int"})]) == []
    assert compatibility_problems("BACKWARD", with_field({"type": "map", "values": "int"}),
                                  [with_field({"type": "map", "values": "string"})]) != []
    renamed = schema_with() | {"name": "Happening"}
    assert "record Event is now record Happening" in backward(renamed)[0]
    assert backward(renamed | {"aliases": ["Event"]}) == []


def test_invalid_schemas_are_rejected_when_parsed():
    with pytest.raises(SchemaError, match="not valid JSON"):
        parse("{", where="new.avsc")
    with pytest.raises(SchemaError, match="top level must be an Avro record"):
        parse('"string"')
    with pytest.raises(SchemaError, match="field 'event_id' appears twice"):
        parse(schema_with([{"name": "event_id", "type": "string"}]))
    with pytest.raises(SchemaError, match=r"default \"x\" does not match its type .*FIRST branch"):
        parse(schema_with([{"name": "c", "type": ["null", "string"], "default": "x"}]))
    with pytest.raises(SchemaError, match="unknown type name 'Missing'"):
        parse(schema_with([{"name": "c", "type": "Missing"}]))
    with pytest.raises(avro_compat.ToolError, match="unknown compatibility mode"):
        compatibility_problems("SIDEWAYS", CURRENT, [CURRENT])
