"""Sluice analytics: the PySpark ``sluice`` DataSource, pure DataFrame transforms and the thin
jobs the control plane's Celery tasks run (docs/analytics.md)."""
