"""The `durables` format: one Python data source that reads and writes channels."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .options import read_options, write_options
from .reporting import plain_errors
from .schema import SOURCE_SCHEMA
from .sink import BatchWriter, StreamWriter
from .source import BatchReader, StreamReader


class DurablesDataSource(DataSource):
    """Spark's entry point; options are checked when a reader or writer is made, on the
    driver, so a bad one stops the query at its start."""

    @classmethod
    def name(cls) -> str:
        return "durables"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    @plain_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(read_options(self.options))

    @plain_errors
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(read_options(self.options))

    @plain_errors
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(write_options(self.options, streaming=False), schema)

    @plain_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(write_options(self.options, streaming=True), schema)
