"""Thin jobs: read with the ``sluice`` source, apply ``spark.transforms``, collect rows.

Each ``run(spark, spec, ...)`` returns plain Python rows (dicts) for the caller (the control
plane's Celery task) to store; jobs never touch a database.
"""
