"""The columns the `durables` format reads, and the columns its sink accepts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..errors import ConfigError

SOURCE_SCHEMA = StructType(
    [
        StructField("id", StringType(), nullable=False),
        StructField("channel", StringType(), nullable=False),
        StructField("key", StringType(), nullable=True),
        StructField("data", BinaryType(), nullable=False),
        StructField("properties", MapType(StringType(), StringType()), nullable=False),
        StructField("timestamp", TimestampType(), nullable=False),
        StructField("redelivered", BooleanType(), nullable=False),
    ]
)
"""One row per event; property values are strings (numbers and booleans as text)."""

ARROW_SCHEMA = to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")
"""Spark takes Arrow batches of exactly this schema from a reader without converting
each row in Python."""


def arrow_batch(rows: Sequence[tuple[Any, ...]]) -> pa.RecordBatch:
    """Source rows (timestamps in epoch milliseconds) as one Arrow batch."""
    ids, channels, keys, data, properties, stamps, redelivered = zip(*rows, strict=True)
    columns = [
        pa.array(ids, pa.string()),
        pa.array(channels, pa.string()),
        pa.array(keys, pa.string()),
        pa.array(data, pa.binary()),
        pa.array([list(p.items()) for p in properties], ARROW_SCHEMA.field(4).type),
        pa.array([ms * 1000 for ms in stamps], ARROW_SCHEMA.field(5).type),
        pa.array(redelivered, pa.bool_()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


PASSED_OVER = frozenset({"id", "channel", "timestamp", "redelivered"})
"""Source columns a sink ignores, so a stream can be copied to another channel as it is:
the server gives the new events their own ids and times."""
_PROPERTY_VALUES = (StringType, IntegerType, LongType, DoubleType, FloatType, BooleanType)


@dataclass(frozen=True)
class SinkColumns:
    """Where the sink finds each part of an event in a row (None: the column is absent)."""

    data: int
    key: int | None
    properties: int | None


def sink_columns(schema: StructType) -> SinkColumns:
    """Check the rows a sink gets; `ConfigError` names the first column it cannot publish."""
    found: dict[str, tuple[int, DataType]] = {}
    for index, field in enumerate(schema.fields):
        name = field.name.lower()
        if name in PASSED_OVER:
            continue
        if name not in ("data", "key", "properties"):
            raise ConfigError(
                f"the durables sink cannot publish column {field.name!r}: it takes data "
                "(binary or string), key (string) and properties (map<string,string>); "
                "select or drop the other columns first"
            )
        found[name] = (index, field.dataType)
    if "data" not in found:
        raise ConfigError("the durables sink needs a column data (binary or string)")
    data_index, data_type = found["data"]
    _require("data", data_type, isinstance(data_type, BinaryType | StringType), "binary or string")
    key = found.get("key")
    if key is not None:
        _require("key", key[1], isinstance(key[1], StringType), "string")
    properties = found.get("properties")
    if properties is not None:
        kind = properties[1]
        fits = (
            isinstance(kind, MapType)
            and isinstance(kind.keyType, StringType)
            and isinstance(kind.valueType, _PROPERTY_VALUES)
        )
        _require("properties", kind, fits, "map<string,string> (or a map to numbers/booleans)")
    return SinkColumns(
        data_index,
        None if key is None else key[0],
        None if properties is None else properties[0],
    )


def _require(column: str, found: DataType, fits: bool, wanted: str) -> None:
    if not fits:
        raise ConfigError(
            f"the durables sink's column {column} must be {wanted}, "
            f"got {found.simpleString()}; cast it first"
        )
