"""Projects, their members and API keys."""
