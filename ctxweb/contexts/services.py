"""Writes for sessions, turns, messages, artifacts and operations."""
