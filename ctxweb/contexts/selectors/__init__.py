"""Reads: every query lives in these modules, one per resource. Selectors read models and build
what interfaces show; they never write and never import services or interfaces."""

from __future__ import annotations

from ctxweb.contexts.selectors.artifacts import (
    artifact_content,
    artifact_get,
    artifact_keys_stored,
)
from ctxweb.contexts.selectors.managed import (
    ManagedState,
    NoContext,
    managed_context,
    managed_context_context,
    managed_context_get,
    managed_context_latest,
)
from ctxweb.contexts.selectors.operations import (
    operation_active,
    operation_get,
    operation_list,
    turn_operation_event,
)
from ctxweb.contexts.selectors.sessions import (
    SESSION_SORTS,
    session_for_user,
    session_get,
    session_list,
)
from ctxweb.contexts.selectors.turns import (
    message_detail,
    message_tokens,
    messages_by_id,
    turn_context,
    turn_detail,
    turn_get,
    turn_latest,
    turn_list,
    turn_message_ids,
    turn_messages,
    turn_previous,
)

__all__ = [
    "SESSION_SORTS",
    "ManagedState",
    "NoContext",
    "artifact_content",
    "artifact_get",
    "artifact_keys_stored",
    "managed_context",
    "managed_context_context",
    "managed_context_get",
    "managed_context_latest",
    "message_detail",
    "message_tokens",
    "messages_by_id",
    "operation_active",
    "operation_get",
    "operation_list",
    "session_for_user",
    "session_get",
    "session_list",
    "turn_context",
    "turn_detail",
    "turn_get",
    "turn_latest",
    "turn_list",
    "turn_message_ids",
    "turn_messages",
    "turn_operation_event",
    "turn_previous",
]
