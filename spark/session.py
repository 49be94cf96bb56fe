"""The SparkSession every job uses: ``local[*]`` by default, ``SPARK_MASTER`` otherwise.

Executors must run this virtualenv's Python (``PYSPARK_PYTHON``; pyarrow and the project are
installed there) and bind to loopback unless told otherwise (``SPARK_LOCAL_IP``); times are
UTC throughout. One session per process: starting one costs 7-8 s here.
"""

from __future__ import annotations

import os
import sys

DEFAULT_MASTER = "local[*]"


def spark_env() -> dict[str, str]:
    """Environment the driver and executors need (set before the JVM starts)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH", "")
    return {
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable),
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
        "PYTHONPATH": root if not path else f"{root}{os.pathsep}{path}",
    }


_session = None


def shuffle_partitions(master: str) -> str:
    """``SPARK_SHUFFLE_PARTITIONS``, else one per core for ``local[N]``/``local[*]`` and 8 on a
    cluster. The jobs shuffle small aggregates (per partition and second or minute), never
    the records, so Spark's default of 200 (or 8 on two cores) only adds tasks; AQE coalesces
    further when they are smaller still."""
    if os.environ.get("SPARK_SHUFFLE_PARTITIONS"):
        return os.environ["SPARK_SHUFFLE_PARTITIONS"]
    if master.startswith("local"):
        inside = master[len("local") :].strip("[]").split(",")[0]
        cores = (os.cpu_count() or 2) if inside in ("", "*") else int(inside)
        return str(max(1, cores))
    return "8"


def adaptive(master: str) -> str:
    """``SPARK_ADAPTIVE``, else off for ``local[...]`` and on for a cluster. Locally the
    shuffles are already one partition per core (``shuffle_partitions``), so adaptive
    execution has nothing to coalesce, while it runs every exchange as a job of its own and
    re-plans between them: on the lag and throughput benchmark (10M records, local[2]) it
    was 24 Spark jobs instead of 7 and about 0.5-1 s slower per run. On a cluster, with
    more partitions than data and unknown source sizes, it is worth its cost."""
    if os.environ.get("SPARK_ADAPTIVE"):
        return os.environ["SPARK_ADAPTIVE"]
    return "false" if master.startswith("local") else "true"


CODEGEN_CACHE_ENTRIES = "1000"


def codegen_cache_entries() -> str:
    """``SPARK_CODEGEN_CACHE_ENTRIES``, else 1000: how many generated classes Spark keeps
    compiled (its default is 100). One lag + throughput run generates about 140 distinct
    classes (every window, sort and projection has its own), so with 100 the cache evicted
    each class before the next run asked for it again: every scheduled run re-compiled all
    of them with Janino and the JVM JIT-compiled them again (about 6 s of compiler time per
    run on two cores, the lag's final stage alone 3-4 s). A class is reused only if its
    code is the same, so the transforms write higher-order functions' lambdas in SQL (a
    Python lambda's variable gets a fresh name per call, and the name lands in the code).
    Both together, a warm session's run compiles nothing."""
    return os.environ.get("SPARK_CODEGEN_CACHE_ENTRIES", CODEGEN_CACHE_ENTRIES)


def get_session(master: str | None = None, app_name: str = "sluice-analytics", **conf: str):
    """The process's session (created once; ``master`` and ``conf`` apply on creation)."""
    global _session
    if _session is not None and not _session.sparkContext._jsc.sc().isStopped():
        return _session
    from pyspark.sql import SparkSession

    from spark.datasource import register

    os.environ.update(spark_env())
    master = master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", shuffle_partitions(master))
        .config("spark.sql.adaptive.enabled", adaptive(master))
        .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
        .config("spark.sql.codegen.cache.maxEntries", codegen_cache_entries())
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
        .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"])
    )
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    register(spark)
    _session = spark
    return spark
