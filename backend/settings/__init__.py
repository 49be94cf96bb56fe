"""Settings split by environment: base, local (the embedded default), production, test."""
