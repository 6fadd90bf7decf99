"""Reads: every query lives in these modules, one per resource. Selectors read models and build
what interfaces show; they never write and never import services or interfaces."""

from __future__ import annotations

from ctxweb.contexts.selectors.artifacts import (
    artifact_content,
    artifact_get,
    artifact_keys_stored,
)
from ctxweb.contexts.selectors.audit import audit_list
from ctxweb.contexts.selectors.exports import (
    EXPORT_FORMATS,
    session_export_jsonl,
    session_export_otlp,
)
from ctxweb.contexts.selectors.imports import import_job_get, import_job_list
from ctxweb.contexts.selectors.inspector import (
    artifacts_by_id,
    turn_diff,
    turn_inspector,
    turn_message_id_lists,
)
from ctxweb.contexts.selectors.managed import (
    ManagedState,
    NoContext,
    artifact_pointers,
    managed_context,
    managed_context_context,
    managed_context_get,
    managed_context_latest,
    managed_context_request,
)
from ctxweb.contexts.selectors.operations import (
    operation_active,
    operation_get,
    operation_list,
    turn_operation_event,
)
from ctxweb.contexts.selectors.sessions import (
    POLICY,
    REGIONS,
    SESSION_SORTS,
    USED_REGIONS,
    session_any,
    session_budget,
    session_for_user,
    session_get,
    session_list,
    session_models,
    session_totals,
    session_watchable,
)
from ctxweb.contexts.selectors.turns import (
    find_artifact_pointers,
    message_detail,
    message_secrets,
    message_tokens,
    messages_by_id,
    turn_context,
    turn_detail,
    turn_get,
    turn_latest,
    turn_list,
    turn_message_hashes,
    turn_message_ids,
    turn_messages,
    turn_previous,
)

__all__ = [
    "EXPORT_FORMATS",
    "POLICY",
    "REGIONS",
    "SESSION_SORTS",
    "USED_REGIONS",
    "ManagedState",
    "NoContext",
    "artifact_content",
    "artifact_get",
    "artifact_keys_stored",
    "artifact_pointers",
    "artifacts_by_id",
    "audit_list",
    "find_artifact_pointers",
    "import_job_get",
    "import_job_list",
    "managed_context",
    "managed_context_context",
    "managed_context_get",
    "managed_context_latest",
    "managed_context_request",
    "message_detail",
    "message_secrets",
    "message_tokens",
    "messages_by_id",
    "operation_active",
    "operation_get",
    "operation_list",
    "session_any",
    "session_budget",
    "session_export_jsonl",
    "session_export_otlp",
    "session_for_user",
    "session_get",
    "session_list",
    "session_models",
    "session_totals",
    "session_watchable",
    "turn_context",
    "turn_detail",
    "turn_diff",
    "turn_get",
    "turn_inspector",
    "turn_latest",
    "turn_list",
    "turn_message_hashes",
    "turn_message_id_lists",
    "turn_message_ids",
    "turn_messages",
    "turn_operation_event",
    "turn_previous",
]
