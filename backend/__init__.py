"""Sluice control plane (Django): tenants, topics, ACLs, quotas, metadata and the console API."""
