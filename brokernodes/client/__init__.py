"""Sluice Python SDK: producer, consumer, group consumer and admin client."""
