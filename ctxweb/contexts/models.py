"""Sessions, turns, messages, artifacts and operations."""
