"""Sluice control plane (Django): tenants, topics, ACLs, quotas, metadata and the console API."""

# The Celery app loads with Django, so ``shared_task`` and ``.delay`` use it (backend/celery.py).
from backend.celery import app as celery_app

__all__ = ["celery_app"]
