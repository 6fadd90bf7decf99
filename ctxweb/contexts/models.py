"""Sessions, turns, messages, artifacts and operations.

Links from turns and managed contexts to their messages and tool sets are ``RESTRICT``: a
message in use cannot be deleted alone, but it goes with its project (a cascade from the same
deletion).

Storage grows with distinct content: a :class:`Message` (and a :class:`ToolSet`) is stored once per
project by content hash, with its token counts per encoding; a :class:`Turn` refers to its messages
by id, as a delta on the previous turn (the ids it shares with it are not repeated) with a full
list every :data:`KEYFRAME_EVERY` turns, so a 1,000-turn session does not store a million ids.
"""

from __future__ import annotations

import datetime

from django.conf import settings
from django.db import models

from ctxweb.accounts.models import Project
from ctxweb.contexts.fields import KeyOrderJSONField

KEYFRAME_EVERY = 32


class Session(models.Model):
    """One agent conversation, addressed by the client's own ``external_id``."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    external_id = models.CharField(max_length=200)
    format = models.CharField(max_length=32)
    model = models.CharField(max_length=200, blank=True)
    context_window = models.PositiveIntegerField()
    context_window_source = models.CharField(
        max_length=16,
        default="model",
        help_text="request: a turn stated the window (a header, the model's [1m] suffix,"
        " context_window); model or default: guessed (compaction.windows)",
    )
    output_reserve = models.PositiveIntegerField(default=0)
    encoding = models.CharField(max_length=32)
    approximate = models.BooleanField(default=False)
    policy = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=64, blank=True, help_text="api, or the imported format")
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Denormalized from the latest turn, for the sessions list.
    turn_count = models.PositiveIntegerField(default=0)
    last_total_tokens = models.PositiveIntegerField(default=0)
    last_fill = models.FloatField(default=0.0, db_index=True)
    compaction_count = models.PositiveIntegerField(default=0)
    secret_count = models.PositiveIntegerField(
        default=0, help_text="secrets found in the messages its turns brought"
    )
    unread_call_count = models.PositiveIntegerField(
        default=0, help_text="its calls that could not be read (UnreadCall), kept raw"
    )
    attributed_turns = models.PositiveIntegerField(
        default=0,
        help_text="its first turns that the attribution rollups hold (the rest are attributed"
        " after their answers: services.attribution.attribution_catch_up)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="session_external_id_unique_per_project"
            )
        ]
        ordering = ["-last_activity_at"]

    def __str__(self) -> str:
        return self.external_id


class Message(models.Model):
    """A normalized message, stored once per project by content hash.

    ``data`` is the canonical dict of :func:`compaction.messages.message_to_dict`; ``counts`` maps
    an encoding to ``{"total": n, "regions": {region: n}, "parts": [n, ...]}``.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="messages")
    hash = models.CharField(max_length=64)
    role = models.CharField(max_length=16)
    data = KeyOrderJSONField()
    size = models.PositiveIntegerField(help_text="bytes of canonical JSON")
    counts = models.JSONField(default=dict)
    secrets = models.JSONField(
        default=list,
        blank=True,
        help_text="secrets found when first stored: kind, message, field, start, end (in data)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "hash"], name="message_unique_per_project")
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.hash[:10]}"


class ToolSet(models.Model):
    """A list of tool definitions, stored once per project by content hash."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="toolsets")
    hash = models.CharField(max_length=64)
    data = KeyOrderJSONField()
    counts = models.JSONField(default=dict, help_text="encoding -> tokens")
    secrets = models.JSONField(
        default=list,
        blank=True,
        help_text="secrets in the definitions: kind, message, field (tools.<n>...), start, end",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "hash"], name="toolset_unique_per_project")
        ]

    def __str__(self) -> str:
        return f"tools {self.hash[:10]}"


class Turn(models.Model):
    """One model call: the context it sent (by reference), the response and reported usage."""

    #: The columns the chart reads (:class:`ctxweb.shapes.TurnOutput`; a test keeps the two in
    #: step): the turn list loads only these, and a ``turn.created`` event carries them.
    CHART_FIELDS = (
        "index",
        "total_tokens",
        "counted_tokens",
        "regions",
        "reported_input_tokens",
        "events",
        "context_window",
        "max_output_tokens",
        "created_at",
        "occurred_at",
    )

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    # NULL, not "", when absent: the uniqueness constraint applies only to given ids.
    turn_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    body_hash = models.CharField(max_length=64, blank=True)
    # The message ids: the first `shared` ids of the previous turn's list, then `tail`.
    # A keyframe has shared == 0 and its whole list in `tail`.
    shared = models.PositiveIntegerField(default=0)
    tail = models.JSONField(default=list)
    keyframe = models.BooleanField(default=True)
    message_count = models.PositiveIntegerField(default=0)
    system = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.RESTRICT, related_name="+"
    )
    toolset = models.ForeignKey(
        ToolSet, null=True, blank=True, on_delete=models.RESTRICT, related_name="+"
    )
    unknown = models.JSONField(
        default=list, blank=True, help_text="'system', 'tools' if unrecorded"
    )
    request_extra = models.JSONField(default=dict, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    context_window = models.PositiveIntegerField()
    total_tokens = models.PositiveIntegerField()
    counted_tokens = models.PositiveIntegerField()
    regions = models.JSONField(default=dict)
    reported_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    response = models.JSONField(null=True, blank=True)
    events = models.JSONField(default=list, blank=True)
    secrets = models.JSONField(
        default=list,
        blank=True,
        help_text="secrets in the messages this turn brought: kind, message, position, field, "
        "start, end",
    )
    operation = models.ForeignKey(
        "Operation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the applied operation this turn continued from",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    occurred_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="when the call happened by its source's clock (an imported transcript's"
        " timestamp, a span's start), if it said; created_at is when it was recorded",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="turn_index_unique"),
            models.UniqueConstraint(
                fields=["session", "turn_id"],
                name="turn_id_unique_per_session",
                condition=models.Q(turn_id__isnull=False),
            ),
        ]
        ordering = ["session", "index"]

    def __str__(self) -> str:
        return f"{self.session} #{self.index}"

    @property
    def called_at(self) -> datetime.datetime:
        """When the call happened: by its source's clock when it said, else when recorded."""
        return self.occurred_at or self.created_at


class Artifact(models.Model):
    """Full content taken out of a context; ``[EXTERNALIZED:<id>]`` points at it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="artifacts")
    key = models.CharField(max_length=64, help_text="content-addressed id (sha256)")
    kind = models.CharField(max_length=32)
    content = models.TextField()
    size = models.PositiveIntegerField()
    tokens = models.PositiveIntegerField(default=0)
    summary = models.TextField(blank=True)
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="artifacts"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="artifact_unique_per_project")
        ]

    def __str__(self) -> str:
        return self.key


class Operation(models.Model):
    """An applied plan: a background job with status and progress."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="operations")
    strategy = models.CharField(max_length=64)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.JSONField(default=dict)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    automatic = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    key_prefix = models.CharField(
        max_length=16, blank=True, help_text="the operator key's prefix, when a key applied it"
    )
    base_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="the managed context version it ran on (0: the turn's)"
    )
    result_version = models.PositiveIntegerField(null=True, blank=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(
        max_length=200, blank=True, help_text="host:pid of the process that runs it"
    )
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["session", "status"], name="operation_session_status")]
        constraints = [
            # At most one queued or running operation per session, whatever the races.
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(status__in=["queued", "running"]),
                name="operation_one_active_per_session",
            )
        ]

    def __str__(self) -> str:
        return f"{self.strategy} on {self.session} ({self.status})"


class ManagedContext(models.Model):
    """One version of what the agent should send next: a context made by an operation.

    Versions count 1, 2, ... per session. It is *current* while no turn was posted since it was
    made (``turn_index`` is the session's latest turn); once the agent posts a turn, that turn is
    the managed context again. Undo makes a new version equal to the one before, so versions
    only ever grow and an ``ETag`` never comes back with other content. Message ids are the
    full list (versions are few); messages are stored once, like a turn's.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="managed_contexts")
    version = models.PositiveIntegerField()
    operation = models.ForeignKey(
        Operation,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="managed_contexts",
        help_text="the operation that made it (null for an undo)",
    )
    turn_index = models.PositiveIntegerField(help_text="the session's latest turn when made")
    message_ids = models.JSONField(default=list)
    system = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.RESTRICT, related_name="+"
    )
    toolset = models.ForeignKey(
        ToolSet, null=True, blank=True, on_delete=models.RESTRICT, related_name="+"
    )
    request_extra = models.JSONField(default=dict, blank=True)
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True)
    total_tokens = models.PositiveIntegerField()
    regions = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "version"], name="managed_context_version_unique"
            )
        ]
        ordering = ["session", "-version"]

    def __str__(self) -> str:
        return f"{self.session} v{self.version}"


class ImportJob(models.Model):
    """A transcript file being imported in the background: status, progress, what it stored.

    The uploaded file waits in the database (web processes and workers share nothing else) until
    the job has run; it is dropped when the job succeeds and kept when it fails (importing it again
    resumes: turns already stored are skipped).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="import_jobs")
    name = models.CharField(max_length=255, help_text="the uploaded file's name")
    format = models.CharField(max_length=32, default="auto", help_text="as asked (auto: detected)")
    prefix = models.CharField(max_length=100, blank=True)
    size = models.PositiveBigIntegerField(help_text="the file's size in bytes")
    data = models.BinaryField(blank=True, default=b"", help_text="the file, until imported")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    turns_done = models.PositiveIntegerField(default=0)
    turns_total = models.PositiveIntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    key_prefix = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["project", "-created_at"], name="import_job_recent")]

    def __str__(self) -> str:
        return f"import {self.pk} of {self.name} ({self.status})"


class AuditEvent(models.Model):
    """Who applied, undid or deleted what, and when. Kept after its session is deleted (the
    session is named, not linked); deleted with its project."""

    class Action(models.TextChoices):
        OPERATION_APPLY = "operation.apply"
        OPERATION_UNDO = "operation.undo"
        SESSION_DELETE = "session.delete"
        SESSION_EXPIRE = "session.expire"
        SESSION_POLICY = "session.policy"
        PROJECT_POLICY = "project.policy"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="audit_events")
    action = models.CharField(max_length=32, choices=Action.choices)
    session_external_id = models.CharField(max_length=200, blank=True)
    operation_id = models.PositiveBigIntegerField(null=True, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(
        max_length=200, help_text="the username, the key's prefix, or 'retention'"
    )
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["project", "-created_at"], name="audit_recent")]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.session_external_id}"


class UnreadCall(models.Model):
    """A model call ctxweb relayed but could not read, kept raw so that it is never silently lost.

    The bodies are stored as relayed but for compression: a compressed answer (gzip, deflate or
    zstd) is stored decompressed when it decompresses within the body cap, and
    ``content_encoding`` is empty; one that does not is stored as relayed, and
    ``content_encoding`` names its encoding. A body past ``CTXWEB_MAX_REQUEST_BYTES`` keeps its
    first bytes and is marked ``truncated``. Headers are not stored (the provider's key travels
    in them). At most ``CTXWEB_UNREAD_CALLS_PER_PROJECT`` are kept per project, the oldest
    dropped first; deleting the session deletes its calls.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="unread_calls")
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="unread_calls",
        help_text="the session the call named or joined, when it exists",
    )
    external_id = models.CharField(
        max_length=200, blank=True, help_text="the session id the call named or joined, if any"
    )
    source = models.CharField(max_length=32, default="proxy")
    format = models.CharField(max_length=32)
    request_body = models.BinaryField()
    response_body = models.BinaryField()
    request_size = models.PositiveBigIntegerField(help_text="bytes of request_body as stored")
    response_size = models.PositiveBigIntegerField(help_text="bytes of response_body as stored")
    content_encoding = models.CharField(
        max_length=16, blank=True, help_text="the response's encoding when kept compressed"
    )
    truncated = models.BooleanField(default=False, help_text="a body was cut at the cap")
    streamed = models.BooleanField(default=False)
    error = models.TextField(help_text="why it could not be read (the field, or the exception)")
    error_path = models.CharField(max_length=300, blank=True, help_text="the field at fault")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["project", "-created_at"], name="unread_call_recent"),
        ]

    def __str__(self) -> str:
        return f"unread {self.format} call {self.pk}"


class PendingCall(models.Model):
    """A call the proxy relayed, waiting to be recorded: the queue between relaying and recording.

    The raw exchange is written first, cheaply: the request and the answer go to two files under
    ``CTXWEB_DATA_DIR/recordings/`` (the answer as it is relayed, chunk by chunk) while this row
    says whose call it is and how to read it. Recorders (Celery workers in the production shape,
    a small pool of threads in the embedded one) then parse it into a turn and delete both; what
    they cannot record becomes an :class:`UnreadCall`. The queue survives a restart: a row whose
    relaying process died is taken up again when its answer had been relayed whole.

    Calls of one ``lane`` (the session the call names, else the key that relayed it) are recorded
    one at a time in order, so a call that extends the previous one finds it recorded.
    """

    RECEIVING = "receiving"  # the answer is still being relayed (and written)
    PENDING = "pending"  # relayed whole: waiting for a recorder
    WORKING = "working"  # a recorder has it (until ``claimed_at`` + the lease)
    STATES = [(RECEIVING, "receiving"), (PENDING, "pending"), (WORKING, "working")]

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pending_calls")
    key_id = models.BigIntegerField(help_text="the API key that relayed the call")
    lane = models.CharField(max_length=300, help_text="calls of one lane are recorded in order")
    state = models.CharField(max_length=16, choices=STATES, default=RECEIVING)
    call = models.JSONField(default=dict, help_text="how to record it (format, session, ...)")
    spool = models.CharField(max_length=64, help_text="its files' name under recordings/")
    size = models.PositiveBigIntegerField(default=0, help_text="bytes spooled, request and answer")
    owner = models.CharField(max_length=200, help_text="host:pid of the process that holds it")
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["lane", "state", "id"], name="pending_call_lane"),
            models.Index(fields=["state", "created_at"], name="pending_call_state"),
        ]
        constraints = [
            # One row a call: recorders sweeping at once cannot both queue a call a dead relay
            # left (the second row's files would be gone by its turn: a false unread call).
            models.UniqueConstraint(fields=["spool"], name="pending_call_spool"),
        ]

    def __str__(self) -> str:
        return f"pending {self.call.get('format', '')} call {self.pk} ({self.state})"


class ProxyConversation(models.Model):
    """The proxy's memory of a conversation: the messages a recorded call and its answer end
    with (the digest of their identities), per key, and the session they are. The next call that
    extends them joins that session, in whichever process relays or records it, and across a
    restart. Kept for an hour (``proxying.RECENT_SECONDS``)."""

    key_id = models.BigIntegerField()
    digest = models.CharField(max_length=32)
    external_id = models.CharField(max_length=200)
    remembered_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["key_id", "digest"], name="proxy_conversation_once")
        ]

    def __str__(self) -> str:
        return f"{self.key_id}:{self.digest} -> {self.external_id}"


class ProxyMainCalls(models.Model):
    """What a named session's main calls look like, per key: whether they send tool definitions
    and their system prompt's identity (a call that does not extend the session, sends no tools
    where these do and has another system prompt is a side call). Kept for a day."""

    key_id = models.BigIntegerField()
    external_id = models.CharField(max_length=200)
    tools = models.BooleanField()
    system = models.CharField(max_length=128)
    remembered_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["key_id", "external_id"], name="proxy_main_once")
        ]

    def __str__(self) -> str:
        return f"{self.key_id}:{self.external_id} tools={self.tools}"


class Replay(models.Model):
    """A recorded session walked again under one to six policies, side by side.

    ``policies`` holds the columns in order, each ``{"label", "strategy", "params", "trigger"}``;
    column 0 is always the session as recorded (``strategy`` None), added by the service.
    ``results`` holds one entry a column, in the same order: None until that column's run
    finished, then what :func:`compaction.replay.replay` returned (``ReplayResult.to_dict()``).
    ``done`` / ``total`` count turns walked over every column. At most ``CTXWEB_REPLAYS_KEPT``
    are kept per session: the oldest go when a new one is created.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="replays")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    key_name = models.CharField(
        max_length=100, blank=True, help_text="the API key's prefix, when a key asked for it"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    policies = models.JSONField(default=list)
    results = models.JSONField(default=list)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="the last progress a running replay reported"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["session", "-created_at"], name="replay_recent")]

    def __str__(self) -> str:
        return f"replay {self.pk} of {self.session} ({self.status})"


# Attribution rollups (issue 36): maintained at ingest (ctxweb.contexts.services.attribution),
# read by the session and project pages without scanning messages or turns. Every row hangs off
# its session (CASCADE): deleting a session or its project removes its rollups with it, so no
# project-wide total ever has to be subtracted.


class LazyTokenTurns(models.Model):
    """Token-turns kept lazily, so a turn writes only the rows it changes: up to turn ``since``
    the row held ``accrued`` token-turns over ``present`` turns; from ``since`` on it holds
    ``tokens_now`` in every turn. Over a session of ``n`` turns its token-turns are
    ``accrued + tokens_now * (n - since)`` (as :mod:`ctxweb.contexts.selectors.attribution`
    reads them)."""

    # Signed: a turn's upsert carries the change (negative when it drops the row's tokens) in it.
    tokens_now = models.IntegerField(default=0)
    accrued = models.PositiveBigIntegerField(default=0, help_text="token-turns before since")
    present = models.PositiveIntegerField(default=0, help_text="turns present before since")
    since = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True


class AttributionItem(LazyTokenTurns):
    """One item of a session (:class:`compaction.attribution.Item` identity: region, kind, name,
    detail) and its totals over the session's turns, its token-turns kept lazily
    (:class:`LazyTokenTurns`).
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    #: sha1 of region, kind, name and detail: the identity in a short indexed column.
    key = models.CharField(max_length=40)
    region = models.CharField(max_length=16)
    kind = models.CharField(max_length=24)
    name = models.CharField(max_length=500)
    group = models.CharField(max_length=500)
    detail = models.CharField(max_length=500, blank=True)
    tokens_peak = models.PositiveIntegerField(default=0)
    introduced = models.PositiveBigIntegerField(
        default=0, help_text="tokens the session's turns brought in (new messages)"
    )
    count = models.PositiveIntegerField(default=0, help_text="times brought in")
    first_turn = models.PositiveIntegerField(default=0)
    last_turn = models.PositiveIntegerField(
        default=0, help_text="the last turn that held it, when it no longer is held"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="attribution_item_unique")
        ]
        indexes = [models.Index(fields=["kind", "session"], name="attribution_item_kind")]

    def __str__(self) -> str:
        return f"{self.session_id} {self.kind} {self.name}"


class AttributionLabel(LazyTokenTurns):
    """A session's items added up under one name of the project overview's top lists
    (``category``: tools, by tool or MCP server; mcp_servers; files; instructions), with the
    same lazy token-turns as :class:`AttributionItem`: the overview adds up these narrow rows,
    one per session and name, instead of every item."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    category = models.CharField(max_length=16)
    label = models.CharField(max_length=500)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "category", "label"], name="attribution_label_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.session_id} {self.category} {self.label}"


class AttributionEntry(models.Model):
    """The items one position of a session's latest context brought (a message, or the system
    prompt, tools, request overhead and provider remainder at negative positions), kept to
    subtract them when a later turn drops it. ``ref`` tells whether the thing there changed
    (message, system row or tool set id; the provider remainder's tokens)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    position = models.IntegerField()
    ref = models.BigIntegerField()
    #: [[region, kind, name, detail, group, tokens], ...]
    items = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="attribution_entry_unique")
        ]

    def __str__(self) -> str:
        return f"{self.session_id} @{self.position}"


class ToolUse(models.Model):
    """One tool call or tool output a session's turns brought in, for the per-tool table and
    the outputs never referred to again (``probes``: the file path, or a few distinctive lines,
    looked for in the assistant messages that come after it)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    turn = models.PositiveIntegerField()
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, help_text="call or output")
    tool = models.CharField(max_length=500)
    name = models.CharField(max_length=500, help_text="the file, else the tool")
    tokens = models.PositiveIntegerField(default=0)
    probes = models.JSONField(default=list)
    referenced = models.BooleanField(default=False)

    class Meta:
        indexes = [models.Index(fields=["session", "kind", "referenced"], name="tool_use_session")]

    def __str__(self) -> str:
        return f"{self.session_id} {self.kind} {self.tool}"


class AttributionDay(models.Model):
    """A session's turns of one day (UTC) added up: the project overview's rows."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    turns = models.PositiveIntegerField(default=0)
    tokens = models.PositiveBigIntegerField(default=0, help_text="token-turns: turn totals")
    # Token-turns by region (compaction.regions.USED_REGIONS), a column each: a turn adds to
    # them in one upsert.
    region_system = models.PositiveBigIntegerField(default=0)
    region_tools = models.PositiveBigIntegerField(default=0)
    region_summary = models.PositiveBigIntegerField(default=0)
    region_user = models.PositiveBigIntegerField(default=0)
    region_assistant = models.PositiveBigIntegerField(default=0)
    region_tool_calls = models.PositiveBigIntegerField(default=0)
    region_tool_results = models.PositiveBigIntegerField(default=0)
    region_reasoning = models.PositiveBigIntegerField(default=0)
    region_media = models.PositiveBigIntegerField(default=0)
    region_other = models.PositiveBigIntegerField(default=0)
    region_unattributed = models.PositiveBigIntegerField(default=0)
    cost = models.FloatField(
        default=0.0, help_text="USD: tokens at the model's input price when stored (no cache)"
    )
    reported = models.PositiveBigIntegerField(default=0)
    counted_reported = models.PositiveBigIntegerField(
        default=0, help_text="ctxweb's count of the turns with reported usage"
    )
    turns_with_usage = models.PositiveIntegerField(default=0)
    peak_fill = models.FloatField(default=0.0)
    over_window_turns = models.PositiveIntegerField(default=0)
    #: strategy -> [count, tokens saved], compactions the turns showed (detected or reported)
    compactions = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "day"], name="attribution_day_unique")
        ]
        indexes = [models.Index(fields=["project", "day"], name="attribution_day_project")]

    def __str__(self) -> str:
        return f"{self.session_id} {self.day}"
