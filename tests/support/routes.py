"""Every route of :mod:`ctxweb.urls`, by URL name, with the calls that exercise it: the isolation
matrix, and the schema test's list of what the API serves."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client


@dataclass
class Ids:
    session: str
    operation: int
    artifact: str
    import_job: int
    unread: int = 0
    replay: int = 0


@dataclass(frozen=True)
class Call:
    """One request to one route, built for a project's ids.

    ``scope`` says what the route touches: ``object`` (a session, turn, operation or artifact:
    another project's is not found), ``list`` (the caller's project: an outsider gets their own,
    empty of alpha's data), ``create`` (acts in the caller's own project), ``public`` (no login).
    """

    method: str
    path: str
    scope: str = "object"
    operator: bool = False
    writer: bool = False  # posts data: API keys and members above viewer only
    data: Any = None
    multipart: bool = False
    ok: tuple[int, ...] = (200,)

    def url(self, ids: Ids) -> str:
        return self.path.format(
            sid=ids.session,
            op=ids.operation,
            art=ids.artifact,
            imp=ids.import_job,
            unr=ids.unread,
            rep=ids.replay,
        )

    def send(self, client: Client, ids: Ids) -> Any:
        url = self.url(ids)
        method = getattr(client, self.method.lower())
        if self.data is None:
            return method(url)
        if self.multipart:
            upload = SimpleUploadedFile("t.json", json.dumps(self.data).encode())
            return method(url, {"file": upload, "format": "openai-chat"})
        if self.path.startswith("/api/"):
            return method(url, data=json.dumps(self.data), content_type="application/json")
        return method(url, self.data)


OPENAI_REQUEST = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}

#: Every route, by URL name: the calls that exercise it.
API: dict[str, list[Call]] = {
    "api-health": [Call("GET", "/api/v1/health", scope="public")],
    "api-schema": [Call("GET", "/api/schema/", scope="public")],
    "api-docs": [Call("GET", "/api/docs/", scope="public")],
    "api-sessions": [Call("GET", "/api/v1/sessions", scope="list")],
    "api-session": [
        Call("GET", "/api/v1/sessions/{sid}"),
        Call(
            "PATCH",
            "/api/v1/sessions/{sid}",
            operator=True,
            data={"policy": {"auto": {"strategy": "baseagent-prune", "enabled": False}}},
        ),
        # The owner deletes it; the operator key after them finds it gone.
        Call("DELETE", "/api/v1/sessions/{sid}", operator=True, ok=(204, 404)),
    ],
    "api-turns": [
        Call("GET", "/api/v1/sessions/{sid}/turns"),
        Call(
            "POST",
            "/api/v1/sessions/{sid}/turns",
            scope="create",
            writer=True,
            data={"format": "openai-chat", "request": OPENAI_REQUEST},
            ok=(201,),
        ),
    ],
    "api-turn": [Call("GET", "/api/v1/sessions/{sid}/turns/0")],
    "api-turn-attribution": [Call("GET", "/api/v1/sessions/{sid}/turns/0/attribution")],
    "api-session-attribution": [Call("GET", "/api/v1/sessions/{sid}/attribution")],
    "api-overview": [Call("GET", "/api/v1/overview", scope="list")],
    "api-overview-items": [
        Call("GET", "/api/v1/overview/items?category=mcp_servers&label=github", scope="list")
    ],
    "api-strategies": [Call("GET", "/api/v1/strategies", scope="list")],
    "api-preview": [
        Call(
            "POST",
            "/api/v1/preview",
            scope="create",
            data={"format": "openai-chat", "request": OPENAI_REQUEST, "strategy": "nanobot-trim"},
        )
    ],
    "api-session-preview": [
        Call("POST", "/api/v1/sessions/{sid}/preview", data={"strategy": "baseagent-prune"})
    ],
    "api-operations": [
        Call("GET", "/api/v1/sessions/{sid}/operations"),
        Call(
            "POST",
            "/api/v1/sessions/{sid}/operations",
            operator=True,
            data={"strategy": "baseagent-middle-out", "params": {}},
            ok=(202, 409),  # the second applier finds the first one's operation still queued
        ),
    ],
    "api-operation": [Call("GET", "/api/v1/operations/{op}")],
    "api-operation-undo": [
        # The second operator finds it undone already: 409, a member's answer.
        Call("POST", "/api/v1/operations/{op}/undo", operator=True, ok=(200, 409))
    ],
    "api-managed-context": [Call("GET", "/api/v1/sessions/{sid}/context")],
    "api-session-export": [
        Call("GET", "/api/v1/sessions/{sid}/export?format=jsonl"),
        Call("GET", "/api/v1/sessions/{sid}/export?format=otlp-json"),
    ],
    "api-artifact": [Call("GET", "/api/v1/artifacts/{art}")],
    "api-import": [
        Call(
            "POST",
            "/api/v1/import",
            scope="create",
            writer=True,
            multipart=True,
            data=[{"id": "imported", "messages": OPENAI_REQUEST["messages"]}],
            ok=(201,),
        )
    ],
    "api-imports": [Call("GET", "/api/v1/imports", scope="list")],
    "api-audit": [Call("GET", "/api/v1/audit", scope="list", operator=True)],
    "api-import-detail": [Call("GET", "/api/v1/imports/{imp}")],
    "api-session-unread-calls": [Call("GET", "/api/v1/sessions/{sid}/unread-calls")],
    "api-unread-calls": [Call("GET", "/api/v1/unread-calls", scope="list")],
    "api-unread-call-raw": [Call("GET", "/api/v1/unread-calls/{unr}/raw")],
    "api-replays": [
        Call("GET", "/api/v1/sessions/{sid}/replays"),
        # Past CTXWEB_REPLAYS_ACTIVE_PER_PROJECT queued replays: 429, a member's answer.
        Call(
            "POST",
            "/api/v1/sessions/{sid}/replays",
            operator=True,
            data={"policies": [{"strategy": "nanobot-trim"}]},
            ok=(202, 429),
        ),
    ],
    "api-replay": [Call("GET", "/api/v1/sessions/{sid}/replays/{rep}")],
    "api-replay-apply": [
        Call(
            "POST",
            "/api/v1/sessions/{sid}/replays/{rep}/apply",
            operator=True,
            data={"column": 1, "to": "session"},
        )
    ],
    "api-replay-presets": [Call("GET", "/api/v1/sessions/{sid}/replay-presets")],
    "api-project": [
        Call("GET", "/api/v1/project", scope="list"),
        Call(
            "PATCH",
            "/api/v1/project",
            scope="create",
            operator=True,
            data={"default_policy": {"trigger": {"fraction": 0.9}}},
        ),
    ],
}
PAGES: dict[str, list[Call]] = {
    "login": [Call("GET", "/accounts/login/", scope="public")],
    "logout": [Call("POST", "/accounts/logout/", scope="public", ok=(302,))],
    "project-switch": [Call("POST", "/accounts/project/", scope="switch", ok=(302,))],
    "home": [Call("GET", "/", scope="list")],
    "overview": [Call("GET", "/overview/", scope="list")],
    "overview-items": [
        Call("GET", "/overview/items/?category=mcp_servers&label=github", scope="list")
    ],
    "session-detail": [Call("GET", "/sessions/{sid}/")],
    "turn-jump": [Call("GET", "/sessions/{sid}/turns/", ok=(302,))],
    "turn-detail": [Call("GET", "/sessions/{sid}/turns/0/")],
    "session-attribution": [Call("GET", "/sessions/{sid}/attribution/")],
    "session-preview": [Call("GET", "/sessions/{sid}/preview/")],
    "session-operation-apply": [
        Call(
            "POST",
            "/sessions/{sid}/operations/",
            operator=True,
            data={"strategy": "baseagent-middle-out", "params": "{}"},
            ok=(302,),
        )
    ],
    "session-replays": [
        Call("GET", "/sessions/{sid}/replays/"),
        # Past CTXWEB_REPLAYS_ACTIVE_PER_PROJECT queued replays the form says so: 400.
        Call(
            "POST",
            "/sessions/{sid}/replays/",
            operator=True,
            data={"presets": ["nanobot"]},
            ok=(302, 400),
        ),
    ],
    "session-replay": [Call("GET", "/sessions/{sid}/replays/{rep}/")],
    "session-replay-apply": [
        Call(
            "POST",
            "/sessions/{sid}/replays/{rep}/apply/",
            operator=True,
            data={"column": "1", "target": "session"},
            ok=(302,),
        )
    ],
    # The confirmation only: deleting is tested in tests/ctxweb/contexts/test_deletion.py.
    "session-delete": [Call("GET", "/sessions/{sid}/delete/", operator=True)],
    "artifact-detail": [Call("GET", "/artifacts/{art}/")],
    "unread-call-raw": [Call("GET", "/unread-calls/{unr}/raw/")],
    "session-unread-call-raw": [Call("GET", "/sessions/{sid}/unread-calls/{unr}/raw/")],
    "setup": [Call("GET", "/setup/", scope="list")],
    "imports": [
        Call("GET", "/imports/", scope="list"),
        Call(
            "POST",
            "/imports/",
            scope="create",
            writer=True,
            multipart=True,
            data=[{"id": "uploaded", "messages": OPENAI_REQUEST["messages"]}],
            ok=(302,),
        ),
    ],
}
WEBSOCKETS = {"ws/sessions/<path:external_id>/"}
#: The OTLP receiver's routes: API keys only, each writing into its own project; isolation,
#: authentication and refusals are tested in tests/ctxweb/capture/test_otlp_receiver.py.
CAPTURE = {
    "otlp-traces",
    "langfuse-otlp-traces",
    "langfuse-ingestion",
    "proxy-openai",
    "proxy-anthropic",
}
