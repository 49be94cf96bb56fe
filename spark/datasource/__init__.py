"""The ``sluice`` PySpark DataSource: ``spark.read.format("sluice")`` and
``spark.readStream.format("sluice")`` with Spark's Kafka source's options (see ``source.py``)."""

from spark.datasource.source import SluiceDataSource, register

__all__ = ["SluiceDataSource", "register"]
