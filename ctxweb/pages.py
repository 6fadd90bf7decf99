"""Project-level pages. The dashboard's pages live in :mod:`ctxweb.contexts.views`; the home
page is its sessions list."""

from ctxweb.contexts.views import session_list as home

__all__ = ["home"]
