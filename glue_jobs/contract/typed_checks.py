"""Type checks of a typed record at any depth: a cheap flag on the parsed values, and the diagnosis that names
the reason and the field path (`items[3].unit_price`) of the first problem in schema order.

Every valid record pays only for `suspect` (expressions on the values the typed parse returned). A record that
did not parse as its type, or that `suspect` flags, is walked by `diagnose` over the texts of its tokens, one
level at a time (glue_jobs/typed_parse.parse_texts), which is what tells a wrong JSON type from a value out of
range and says where. Native expressions only; arrays and maps through Spark's higher-order functions
(transform, exists, aggregate: Spark 3.1+). Nothing here can throw on bad data under ANSI mode (Spark 4's
default): casts run only on texts a pattern has shown to fit.

Reasons: a required value that is absent, null or (a string) blank is missing_required_field; a token of
another JSON type, a number that is not an integer for int/long/timestamps, a string that is not a date is
invalid_type; a number the type cannot hold exactly (an int overflow, more fraction digits than the scale,
more integer digits than the precision allows, a double beyond its range), an enum value that is not a
symbol, an impossible date is out_of_range.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from glue_jobs.dataset_types import Node
from glue_jobs.decoding import typed_parse as tp
from glue_jobs.decoding.json_tokens import CORRUPT

MISSING, INVALID_TYPE, OUT_OF_RANGE = "missing_required_field", "invalid_type", "out_of_range"
UNKNOWN_FIELD = "unknown_field"  # glue_jobs/contract/__init__.py
WHAT = {MISSING: "required field absent, null or empty", INVALID_TYPE: "wrong JSON type", OUT_OF_RANGE: "value out of range",
        UNKNOWN_FIELD: "field not in the schema"}
PROBLEM_DDL = "struct<reason:string,detail:string>"
_INTEGER = r"^-?(0|[1-9][0-9]*)$"
_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
# \z, not $: Java's $ also matches before a final line terminator, and a cast then ignores it ("2024-02-29\n").
_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\z"
_INTEGER_BOUNDS = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1),
                   # Spark timestamps: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z
                   "timestamp-millis": (-62_135_596_800_000, 253_402_300_799_999),
                   "timestamp-micros": (-62_135_596_800_000_000, 253_402_300_799_999_999)}


def problem(reason: str, path: Column, what: str | None = None) -> Column:
    """The reason and `path: <what>` (the reason's own words, WHAT, unless `what` says more)."""
    return F.struct(F.lit(reason).alias("reason"), F.concat(path, F.lit(f": {what or WHAT[reason]}")).alias("detail"))


def when(condition: Column, found: Column) -> Column:
    """`found` if the condition holds (null counts as false), else null."""
    return F.when(F.coalesce(condition, F.lit(False)), found)


def first(problems: list[Column]) -> Column:
    """The first non-null of nullable problem columns, in order (coalesce evaluates no further than needed)."""
    return F.coalesce(*problems) if len(problems) > 1 else problems[0] if problems else F.lit(None).cast(PROBLEM_DDL)


def first_of(problems: Column) -> Column:
    """The first non-null problem of an array of problems."""
    return F.aggregate(problems, F.lit(None).cast(PROBLEM_DDL), lambda found, p: F.coalesce(found, p))


def is_blank(text: Column) -> Column:
    """Empty or only \\s characters."""
    return ~text.rlike("[^ \\t\\n\\x0B\\f\\r]")


def normalized(value: Column, steps: tuple[str, ...]) -> Column:
    """`value` after the dataset's normalize steps, in their order."""
    for step in steps:
        value = {"trim": _strip, "lower": F.lower, "upper": F.upper}[step](value)
    return value


def _strip(value: Column) -> Column:
    """Without \\s characters (Java's: space, \\t, \\n, \\x0b, \\f, \\r) at either end. Each of them sorts at or
    below a space, so only a value whose first or last character does goes through the regular expression."""
    edges = (value.substr(1, 1) <= F.lit(" ")) | (value.substr(-1, 1) <= F.lit(" "))
    return F.when(edges, F.regexp_replace(value, "^[ \\t\\n\\x0B\\f\\r]+|[ \\t\\n\\x0B\\f\\r]+$", "")).otherwise(value)


def valid_date(text: Column) -> Column:
    """YYYY-MM-DD naming a day of the proleptic Gregorian calendar, years 1-9999 (arithmetic only: safe under ANSI)."""
    well_formed = text.rlike(_DATE)  # casts only well-formed digits: ANSI mode (Spark 4's default) throws on ''
    year, month, day = (F.when(well_formed, text.substr(start, length)).cast("int") for start, length in ((1, 4), (6, 2), (9, 2)))
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = (F.when(month == 2, F.when(leap, 29).otherwise(28))
            .when(month.isin(4, 6, 9, 11), 30).otherwise(31))
    return well_formed & (year >= 1) & month.between(1, 12) & (day >= 1) & (day <= days)


def decimal_exact(wide: Column, node: Node) -> Column:
    """The wide-parsed decimal has no fraction digit beyond the scale and fits the declared type (comparing decimals
    compares values); null when `wide` is. A value above the declared type's largest (99999999.99 for decimal(10,2))
    but within the wide type's integer digits has fraction digits beyond the scale, so it is not exact; only a value
    within it is cast to the declared type, where rounding cannot carry into a new digit. Cast without that guard,
    99999999.999 rounds to 100000000.00: the cast overflows (null outside ANSI mode, so the record passed with a
    null value; an error in ANSI mode, Spark 4's default, so the batch failed), and so does the comparison's common
    type."""
    from decimal import Decimal

    largest = F.lit(Decimal(10 ** node.precision - 1).scaleb(-node.scale))
    return F.when(wide.isNull(), F.lit(None)).when(
        F.abs(wide) <= largest, wide == wide.cast(f"decimal({node.precision},{node.scale})")).otherwise(F.lit(False))


def integer_in_range(text: Column, kind: str) -> Column:
    low, high = _INTEGER_BOUNDS[kind]
    digits = F.length(F.regexp_replace(text, "^-", ""))
    fits = digits <= 19
    value = F.when(fits, text).cast("decimal(38,0)")
    return fits & (value >= F.lit(low)) & (value <= F.lit(high))


def suspect(node: Node, value: Column, *, normalize: dict[str, tuple[str, ...]], path: str = "", marked: bool = True,
            decoded: bool = False, json_text: frozenset[str] = frozenset()) -> Column:
    """True when the typed value may break a type rule that the parse itself does not enforce (or is null
    where required). False negatives would let a bad record through; false positives only cost a diagnosis.
    `marked`: a value of the marked parse (a string's token type is checked); else of the plain parse, whose
    string tokens glue_jobs/contract/typed_screen.py has proven. `decoded`: a record the Kafka decoder typed
    (jvm/glue-functions RegistryFrameDecoder), which has a value for every required field (Avro reads no null
    where the type is not a union with null), no NaN or infinity and only exact decimals (it returns no typed
    record otherwise): those checks are skipped. `json_text`: the dataset's json_text paths, whose value may be any JSON
    value (diagnose checks them for presence only, so flagging more would dead-letter a valid record with the
    generic reason)."""
    if decoded and node.kind in ("float", "double", "decimal"):
        return F.lit(False)
    missing = value.isNull() if node.required and not decoded else F.lit(False)
    if path in json_text:
        return missing
    if node.kind in ("string", "enum", "date"):
        text = tp.unmarked(value) if marked else value
        bad = ~tp.is_string_token(value) if marked else F.lit(False)
        if node.required:
            bad = bad | is_blank(text)
        if node.kind == "enum":
            bad = bad | ~normalized(text, normalize.get(path, ())).isin(*node.symbols)
        if node.kind == "date":
            bad = bad | ~valid_date(text)
        return missing | (value.isNotNull() & bad)
    if node.kind in ("float", "double"):
        return missing | F.isnan(value) | (F.abs(value) == float("inf"))
    if node.kind == "decimal":
        return missing | ~decimal_exact(value, node)
    if node.kind in ("timestamp-millis", "timestamp-micros"):
        low, high = _INTEGER_BOUNDS[node.kind]
        return missing | (value < F.lit(low)) | (value > F.lit(high))
    name = tp.field if marked else (lambda struct, n: struct.getField(n))
    flags = {"normalize": normalize, "marked": marked, "decoded": decoded, "json_text": json_text}
    if node.kind == "record":
        inner = [suspect(f.type, name(value, f.name), path=_child(path, f.name), **flags) for f in node.fields]
        return missing | (value.isNotNull() & _any(inner))
    if node.kind == "array":
        if decoded and not _decoded_checks_anything(node.items):
            return missing
        return missing | F.exists(value, lambda x: suspect(node.items, x, path=f"{path}[]", **flags))
    if node.kind == "map":
        if decoded and not _decoded_checks_anything(node.items):
            return missing
        return missing | F.exists(F.map_values(value), lambda x: suspect(node.items, x, path=f"{path}[]", **flags))
    return missing  # boolean, int, long: the parse accepts exactly their tokens


def _decoded_checks_anything(node: Node) -> bool:
    """Whether `suspect(..., decoded=True)` checks anything in values of this type (see suspect)."""
    if node.kind in ("string", "enum", "date", "timestamp-millis", "timestamp-micros"):
        return True
    if node.kind == "record":
        return any(_decoded_checks_anything(f.type) for f in node.fields)
    if node.kind in ("array", "map"):
        return _decoded_checks_anything(node.items)
    return False


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _any(conditions: list[Column]) -> Column:
    result = F.lit(False)
    for condition in conditions:
        result = result | F.coalesce(condition, F.lit(False))
    return result


def diagnose(node: Node, text: Column, where: Column, *, normalize: dict[str, tuple[str, ...]], path: str = "",
             json_text: frozenset[str] = frozenset()) -> Column:
    """The first problem of the token whose text is `text` (null when absent), at the detail path `where`."""
    absent = text.isNull()
    if path in json_text:
        return when(absent & F.lit(node.required), problem(MISSING, where))
    is_string, value = tp.is_string_token(text), tp.unmarked(text)
    checks: list[tuple[Column, Column]] = [(absent, problem(MISSING, where) if node.required else F.lit(None).cast(PROBLEM_DDL))]
    nested = None
    kind = node.kind
    if kind in ("string", "enum", "date"):
        checks.append((~is_string, problem(INVALID_TYPE, where)))
        if node.required:
            checks.append((is_blank(value), problem(MISSING, where)))
        if kind == "enum":
            checks.append((~normalized(value, normalize.get(path, ())).isin(*node.symbols), problem(OUT_OF_RANGE, where)))
        if kind == "date":
            checks += [(~value.rlike(_DATE), problem(INVALID_TYPE, where)), (~valid_date(value), problem(OUT_OF_RANGE, where))]
    elif kind == "boolean":
        checks.append((~text.isin("true", "false"), problem(INVALID_TYPE, where)))
    elif kind in _INTEGER_BOUNDS:
        checks += [(~text.rlike(_INTEGER), problem(INVALID_TYPE, where)), (~integer_in_range(text, kind), problem(OUT_OF_RANGE, where))]
    elif kind in ("float", "double", "decimal"):
        # A number token too large for a double is rendered as Infinity (Jackson quotes it by default) by the parse (a bare one is
        # malformed JSON, a string one starts with the marker), so it is a value out of range.
        checks.append((text.isin("Infinity", "-Infinity", "\"Infinity\"", "\"-Infinity\""), problem(OUT_OF_RANGE, where)))
        checks.append((~text.rlike(_NUMBER), problem(INVALID_TYPE, where)))
        number = F.when(text.rlike(_NUMBER), text).cast(kind if kind != "decimal" else "double")
        checks.append(((F.abs(number) == float("inf")) | F.isnan(number), problem(OUT_OF_RANGE, where)))
        if kind == "decimal":
            precision, scale = node.wide_decimal()
            fits = F.abs(number) < F.lit(10.0 ** (node.precision - node.scale))
            wide = F.when(text.rlike(_NUMBER) & fits, text).cast(f"decimal({precision},{scale})")
            checks.append((~fits | ~decimal_exact(wide, node), problem(OUT_OF_RANGE, where)))
    else:
        checks.append((~text.startswith("[" if kind == "array" else "{"), problem(INVALID_TYPE, where)))
        nested = _diagnose_children(node, text, where, normalize=normalize, path=path, json_text=json_text)
    # An absent token ends the checks (nothing below it to check): its problem, or none when it is optional.
    present = first([when(c, p) for c, p in checks[1:]] + ([nested] if nested is not None else []))
    return F.when(absent, checks[0][1]).otherwise(present)


def diagnose_typed(node: Node, value: Column, *, path: str = "") -> Column:
    """The first problem a typed record shows in its values alone: a required field null (missing) or a float that
    is NaN or infinite (out of range), in records at any depth. For a typed record not from the decoder, whose JSON
    (Spark's to_json) may hold a bare NaN that no JSON diagnosis reads; the rest is diagnosed from that JSON."""
    where = F.lit(path)
    found = [when(value.isNull(), problem(MISSING, where))] if node.required else []
    if node.kind in ("float", "double"):
        found.append(when(F.isnan(value) | (F.abs(value) == float("inf")), problem(OUT_OF_RANGE, where)))
    elif node.kind == "record":
        found.append(F.when(value.isNotNull(), first([diagnose_typed(f.type, value.getField(f.name), path=_child(path, f.name))
                                                      for f in node.fields])))
    return first(found)


def _diagnose_children(node: Node, text: Column, where: Column, *, normalize, path: str, json_text: frozenset[str]) -> Column:
    parsed = tp.parse_texts(text, node)
    if node.kind == "record":
        children = [diagnose(f.type, tp.field(parsed, f.name), F.concat(where, F.lit(f".{f.name}")) if path else F.lit(f.name),
                             normalize=normalize, path=_child(path, f.name), json_text=json_text) for f in node.fields]
        return F.when(parsed.getField(CORRUPT).isNotNull(), problem(INVALID_TYPE, where)).otherwise(F.coalesce(*children))
    if node.kind == "array":
        element = lambda x, i: diagnose(node.items, x, F.concat(where, F.lit("["), i.cast("string"), F.lit("]")),  # noqa: E731
                                        normalize=normalize, path=f"{path}[]", json_text=json_text)
        return first_of(F.transform(parsed, element))
    entries = F.map_entries(parsed)
    entry = lambda e: diagnose(node.items, e.getField("value"),  # noqa: E731
                               F.concat(where, F.lit('["'), tp.unmarked(e.getField("key")), F.lit('"]')), normalize=normalize,
                               path=f"{path}[]", json_text=json_text)
    return first_of(F.transform(entries, entry))
