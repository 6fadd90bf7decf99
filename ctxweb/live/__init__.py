"""Live updates: the session WebSocket's consumer and its routes (Django Channels)."""
