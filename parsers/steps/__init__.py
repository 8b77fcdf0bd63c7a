"""Step-time patterns: read a run's per-step times and name the shape operators recognise in MFU curves."""
