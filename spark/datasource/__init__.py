"""The ``sluice`` PySpark DataSource: ``spark.read.format("sluice")`` (see ``source.py``)."""

from spark.datasource.source import SluiceDataSource, register

__all__ = ["SluiceDataSource", "register"]
