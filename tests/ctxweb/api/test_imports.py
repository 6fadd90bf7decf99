"""Importing transcript files through the ``import_transcript`` command and ``POST /api/v1/import``:
every real transcript becomes sessions of turns, counted, idempotent and kept in its project."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.core.management.base import OutputWrapper
from django.test import TestCase

from compaction.messages import message_to_dict
from compaction.transcripts import ImportedSession, parse_transcript
from compaction.usage import normalize_usage
from ctxweb.contexts.management.commands.import_transcript import ProgressBar
from ctxweb.contexts.models import Session, Turn
from ctxweb.contexts.services import imports as importing
from ctxweb.contexts.services.imports import transcript_import
from tests.support.world import World

pytestmark = pytest.mark.django_db


# (file, transcript format, turns per session, turns with reported usage, compaction events the
# parser emitted, what the format does not record) — verified by hand against the raw files (the
# same turn counts as tests/compaction/test_transcripts.py).
EXPECTED: list[tuple[str, str, list[int], int, int, list[str]]] = [
    ("anthropic-messages/claude-trace-traffic.jsonl", "anthropic-messages", [14, 3, 47], 64, 3, []),
    ("claude-code/agentcmd-session-five.jsonl", "claude-code", [4], 3, 0, ["system", "tools"]),
    ("claude-code/agentcmd-session-four.jsonl", "claude-code", [30], 30, 0, ["system", "tools"]),
    ("claude-code/agentcmd-session-two.jsonl", "claude-code", [11], 11, 0, ["system", "tools"]),
    ("claude-code/image-message.jsonl", "claude-code", [1], 0, 0, ["system", "tools"]),
    (
        "claude-code/sniffly-ai-music-ba79134d.jsonl",
        "claude-code",
        [24],
        24,
        0,
        ["system", "tools"],
    ),
    (
        "claude-code/sniffly-ai-music-d3ad4cdc.jsonl",
        "claude-code",
        [62],
        62,
        0,
        ["system", "tools"],
    ),
    ("claude-code/sniffly-ai-music-fed8ce56.jsonl", "claude-code", [4], 4, 0, ["system", "tools"]),
    ("claude-code/viewer-sample-1af7fc5e.jsonl", "claude-code", [7], 7, 0, ["system", "tools"]),
    (
        "claude-code/viewer-sample-5c0375b4.jsonl",
        "claude-code",
        [10, 3, 7],
        20,
        0,
        ["system", "tools"],
    ),
    (
        "claude-code/viewer-sample-fe5e1c67.jsonl",
        "claude-code",
        [9, 9, 34, 40, 25, 53],
        170,
        0,
        ["system", "tools"],
    ),
    ("codex/agentcmd-rollout-0924-1922.jsonl", "codex", [132], 132, 0, ["system", "tools"]),
    ("codex/agentcmd-rollout-0924-2012.jsonl", "codex", [18], 18, 0, ["system", "tools"]),
    ("codex/agentcmd-rollout-0925-0949.jsonl", "codex", [85], 85, 0, ["system", "tools"]),
    ("openhands/multi-swe-bench-output.jsonl", "openhands", [23, 33, 49], 105, 0, []),
    ("openhands/resolver-output.jsonl", "openhands", [4, 22], 0, 0, ["system", "tools"]),
    ("swe-agent/ctf-crypto-katy.traj", "swe-agent", [18], 0, 0, ["tools"]),
    ("swe-agent/ctf-web-i-got-id.traj", "swe-agent", [21], 0, 0, ["tools"]),
    ("swe-agent/marshmallow-1867-function-calling.traj", "swe-agent", [13], 0, 0, ["tools"]),
    ("swe-agent/pydicom-1458.traj", "swe-agent", [12], 0, 0, ["tools"]),
]
TAU = "openai-chat/tau-bench-gpt-4o-airline.json"
FILES = [row[0] for row in EXPECTED]


def expected(relative: str) -> tuple[str, list[int], int, int, list[str]]:
    [row] = [row for row in EXPECTED if row[0] == relative]
    return row[1:]


def parsed(folder: Path, relative: str) -> list[ImportedSession]:
    path = folder / relative
    return parse_transcript(path.read_bytes(), name=path.name)


def command(*args: str, **options: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_transcript", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def total_of(session: ImportedSession) -> int:
    return len(session.turns)


@pytest.fixture(autouse=True)
def inline_tasks(settings: Any) -> None:
    """Background imports run when the request's transaction commits (see :func:`upload`)."""
    settings.CTXWEB_TASKS_INLINE = True


def upload(world: World, data: bytes, name: str, key: str | None = None, **fields: str) -> Any:
    """POST the file, then run what the request left for after commit (a background import)."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        return world.api(key or world.ingest_key).post(
            "/api/v1/import",
            {"file": SimpleUploadedFile(name, data), **fields},
            format="multipart",
        )


def imported(world: World, data: bytes, name: str, **fields: str) -> dict[str, Any]:
    """Upload the file (in the request, or in the background for a large one) and return the
    finished job."""
    response = upload(world, data, name, **fields)
    assert response.status_code in (201, 202), response.content
    job = world.api(world.ingest_key).get(response.json()["url"]).json()
    assert job["status"] == "succeeded", job
    assert job["progress"]["percent"] == 100
    result: dict[str, Any] = job
    return result


def stored_turns(world: World, prefix: str = "") -> int:
    return Turn.objects.filter(
        session__project=world.project, session__external_id__startswith=prefix
    ).count()


def assert_stored(world: World, sessions: list[ImportedSession], prefix: str = "") -> None:
    """Every imported session and turn is stored as the parser rebuilt it."""
    for imported in sessions:
        session = Session.objects.get(
            project=world.project, external_id=prefix + imported.external_id
        )
        assert session.source == imported.source
        assert session.format == imported.format
        assert session.turn_count == len(imported.turns)
        turns = list(Turn.objects.filter(session=session).order_by("index"))
        assert len(turns) == len(imported.turns)
        compactions = 0
        for index, (turn, stored) in enumerate(zip(imported.turns, turns, strict=True)):
            assert stored.index == index
            assert stored.turn_id == f"import:{index}"
            assert sum(stored.regions.values()) == stored.total_tokens
            assert stored.unknown == sorted(turn.unknown)
            if turn.usage:
                assert stored.reported_input_tokens == turn.usage["input_tokens"]
                assert stored.usage == dict(turn.usage)
            else:
                assert stored.reported_input_tokens is None
            # The parser's events come first; ingestion may add a detected compaction after them.
            assert stored.events[: len(turn.events)] == [dict(e) for e in turn.events]
            assert stored.response == ([message_to_dict(m) for m in turn.response] or None)
            compactions += sum(1 for e in stored.events if e["type"] == "compaction")
        assert session.compaction_count == compactions


def assert_counts(world: World, relative: str, sessions: list[ImportedSession]) -> None:
    """The hand-counted numbers: turns per session, turns with usage, parser events, unknowns."""
    _, turns, with_usage, events, unknown = expected(relative)
    assert [len(s.turns) for s in sessions] == turns
    stored = Turn.objects.filter(session__project=world.project)
    assert stored.count() == sum(turns)
    assert stored.filter(reported_input_tokens__isnull=False).count() == with_usage
    emitted = [e for t in stored for e in t.events if e.get("source") != "detected"]
    assert len(emitted) == events
    assert {tuple(t.unknown) for t in stored} == {tuple(unknown)}


def test_every_transcript_file_is_covered(transcripts: Path) -> None:
    files = {
        str(p.relative_to(transcripts)) for p in transcripts.glob("*/*") if p.name != "README.md"
    }
    assert files == set(FILES) | {TAU}


@pytest.mark.parametrize("relative", FILES)
def test_the_command_imports_each_transcript(
    world: World, transcripts: Path, relative: str
) -> None:
    sessions = parsed(transcripts, relative)
    out, err = command(str(transcripts / relative), project="alpha")
    assert_counts(world, relative, sessions)
    assert_stored(world, sessions)
    for imported in sessions:
        session = Session.objects.get(external_id=imported.external_id)
        peak = max(t.total_tokens for t in session.turns.all())
        line = (
            f"{imported.external_id}: {count(len(imported.turns), 'turn')}, peak {peak:,} tokens, "
            f"{count(session.compaction_count, 'compaction')}"
        )
        assert line in out.splitlines()
    total = sum(len(s.turns) for s in sessions)
    assert f"{Path(relative).name}: {total}/{total} turns (100%)" in err  # not a TTY: plain lines
    assert f"{count(total, 'turn')} imported, 0 already there" in out

    again, _ = command(str(transcripts / relative), project="alpha")
    assert stored_turns(world) == total
    assert f"0 turns imported, {total} already there" in again
    assert f"{sessions[0].external_id}: 0 turns ({total_of(sessions[0])} already imported)" in again


@pytest.mark.parametrize("relative", FILES)
def test_the_api_imports_each_transcript(world: World, transcripts: Path, relative: str) -> None:
    sessions = parsed(transcripts, relative)
    path = transcripts / relative
    body = imported(world, path.read_bytes(), path.name)
    assert body["format"] == expected(relative)[0]
    assert [(s["external_id"], s["turns"], s["skipped"]) for s in body["sessions"]] == [
        (s.external_id, len(s.turns), 0) for s in sessions
    ]
    assert_counts(world, relative, sessions)
    assert_stored(world, sessions)

    again = imported(world, path.read_bytes(), path.name)
    assert [(s["turns"], s["skipped"]) for s in again["sessions"]] == [
        (0, len(s.turns)) for s in sessions
    ]
    assert stored_turns(world) == sum(len(s.turns) for s in sessions)

    outsider = world.api(world.outsider_key)
    external_id = sessions[0].external_id
    assert outsider.get(f"/api/v1/sessions/{external_id}").status_code == 404
    assert outsider.get(f"/api/v1/sessions/{external_id}/turns").status_code == 404
    assert outsider.get("/api/v1/sessions").json()["count"] == 0
    owner = world.api(world.ingest_key)
    assert owner.get("/api/v1/sessions").json()["count"] == len(sessions)


@pytest.mark.slow
def test_the_command_imports_tau_bench(world: World, transcripts: Path) -> None:
    sessions = parsed(transcripts, TAU)
    out, _ = command(str(transcripts / TAU), project="alpha", prefix="tau/")
    assert len(sessions) == 200
    assert Session.objects.filter(project=world.project).count() == 200
    assert stored_turns(world, "tau/") == 2454 == sum(len(s.turns) for s in sessions)
    first = Session.objects.get(external_id="tau/task-0-trial-0")
    assert (first.source, first.format) == ("openai-chat", "openai-chat")
    assert not Turn.objects.filter(reported_input_tokens__isnull=False).exists()  # no usage
    assert {tuple(u) for u in Turn.objects.values_list("unknown", flat=True)} == {("tools",)}
    assert_stored(world, sessions, prefix="tau/")
    assert "200 sessions, 2,454 turns imported, 0 already there" in out


@pytest.mark.slow
def test_the_api_imports_tau_bench(world: World, transcripts: Path) -> None:
    sessions = parsed(transcripts, TAU)
    response = upload(world, (transcripts / TAU).read_bytes(), "tau.json", prefix="tau/")
    assert response.status_code == 202, response.content  # 4 MB: a background job
    assert response["Location"] == response.json()["url"]
    body = world.api(world.ingest_key).get(response.json()["url"]).json()
    assert body["status"] == "succeeded"
    assert body["progress"] == {"done": 2454, "total": 2454, "percent": 100}
    assert body["format"] == "openai-chat"
    assert len(body["sessions"]) == 200
    assert sum(s["turns"] for s in body["sessions"]) == 2454
    assert body["sessions"][0]["external_id"] == "tau/task-0-trial-0"
    assert_stored(world, sessions, prefix="tau/")


def test_normalized_usage_passes_through_unchanged() -> None:
    usage = {
        "input_tokens": 15036,
        "output_tokens": 174,
        "cache_read_tokens": 3,
        "cache_write_tokens": 15032,
    }
    assert normalize_usage(usage) == usage


CHAT = [
    {
        "id": "good",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ],
    },
    {
        "id": "bad",
        "messages": [
            {"role": "user", "content": "fine"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "a\x00b"},
            {"role": "assistant", "content": "x"},
        ],
    },
]


def test_each_session_is_stored_whole_or_not_at_all(world: World) -> None:
    response = upload(world, json.dumps(CHAT).encode(), "chat.json")
    assert response.status_code == 400
    error = response.json()["error"]
    [field] = error["fields"]
    assert field.startswith("sessions.1.turns.1.")
    assert "'bad'" in error["message"]
    assert list(Session.objects.values_list("external_id", flat=True)) == ["good"]
    assert stored_turns(world) == 1


def test_a_dashboard_login_imports_into_its_project(world: World) -> None:
    client = world.login(world.owner)
    data = json.dumps(CHAT[:1]).encode()
    response = client.post(
        "/api/v1/import",
        {"file": SimpleUploadedFile("chat.json", data), "format": "openai-chat"},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert Session.objects.get().project == world.project


def test_a_viewer_logged_in_cannot_import(world: World) -> None:
    response = world.login(world.teammate).post(
        "/api/v1/import",
        {"file": SimpleUploadedFile("chat.json", json.dumps(CHAT[:1]).encode())},
        format="multipart",
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert not Session.objects.exists()


def test_an_anonymous_upload_is_refused(world: World) -> None:
    response = world.api().post(
        "/api/v1/import",
        {"file": SimpleUploadedFile("chat.json", json.dumps(CHAT[:1]).encode())},
        format="multipart",
    )
    assert response.status_code in (401, 403)
    assert not Session.objects.exists()


def test_the_prefix_goes_before_every_session_id(world: World) -> None:
    response = upload(world, json.dumps(CHAT[:1]).encode(), "chat.json", prefix="run-7/")
    assert response.json()["sessions"][0]["external_id"] == "run-7/good"
    assert Session.objects.get().external_id == "run-7/good"


def test_a_prefixed_session_is_reachable_through_every_session_route(world: World) -> None:
    upload(world, json.dumps(CHAT[:1]).encode(), "chat.json", prefix="run-7/")
    api = world.api(world.ingest_key)
    for path in ("", "/turns", "/turns/0"):
        response = api.get(f"/api/v1/sessions/run-7/good{path}")
        assert response.status_code == 200, (path, response.content)
    preview = api.post(
        "/api/v1/sessions/run-7/good/preview", {"strategy": "nanobot-trim"}, format="json"
    )
    assert preview.status_code == 200, preview.content
    login = world.login(world.owner)
    assert login.get("/sessions/run-7/good/").status_code == 200
    assert login.get("/sessions/run-7/good/turns/0/").status_code == 200


@pytest.mark.parametrize(
    ("fields", "data", "field"),
    [
        ({}, None, "file"),
        ({"format": "docx"}, b"[]", "format"),
        ({}, b"", "file"),  # an empty file
        ({}, b"\x89PNG\r\n\x1a\n\x00\x00garbage", "file"),
        ({"format": "codex"}, json.dumps(CHAT).encode(), "line 1"),  # not what it claims to be
        ({"prefix": "x" * 101}, json.dumps(CHAT).encode(), "prefix"),
    ],
)
def test_a_bad_upload_gets_a_400_naming_the_field(
    world: World, fields: dict[str, str], data: bytes | None, field: str
) -> None:
    payload: dict[str, Any] = dict(fields)
    if data is not None:
        payload["file"] = SimpleUploadedFile("upload.json", data)
    response = world.api(world.ingest_key).post("/api/v1/import", payload, format="multipart")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["fields"], error
    assert error["message"]
    assert not Session.objects.exists()


def test_a_json_body_is_not_an_upload(world: World) -> None:
    response = world.api(world.ingest_key).post(
        "/api/v1/import", data=json.dumps(CHAT), content_type="application/json"
    )
    assert response.status_code == 415
    assert "error" in response.json()


def test_the_command_names_what_is_missing(world: World, tmp_path: Path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT[:1]))
    with pytest.raises(CommandError, match="No project named 'nope'"):
        command(str(chat), project="nope")
    with pytest.raises(CommandError, match="No such file"):
        command(str(tmp_path / "absent.jsonl"), project="alpha")
    with pytest.raises(CommandError, match="Unknown format 'docx'"):
        command(str(chat), project="alpha", format="docx")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CommandError, match=r"garbage\.bin: file: not UTF-8"):
        command(str(garbage), project="alpha")
    assert not Session.objects.exists()


def test_the_command_imports_several_files(world: World, tmp_path: Path) -> None:
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    first.write_text(json.dumps(CHAT[:1]))
    second.write_text(json.dumps([{"id": "other", "messages": CHAT[0]["messages"]}]))
    out, _ = command(str(first), str(second), project="alpha", format="openai-chat")
    assert "good: 1 turn, peak" in out
    assert "other: 1 turn, peak" in out
    assert sorted(Session.objects.values_list("external_id", flat=True)) == ["good", "other"]


def test_the_progress_bar_redraws_in_place_on_a_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(OutputWrapper(stream), "f.jsonl", tty=True)
    for done in range(5):
        bar(done, 4)
    bar.close()
    text = stream.getvalue()
    assert text.startswith("\rf.jsonl [" + "-" * 30 + "] 0/4 turns")
    assert "\rf.jsonl [" + "#" * 30 + "] 4/4 turns  " in text  # the last frame is always drawn
    assert text.endswith("s\n")
    assert text.count("\n") == 1  # redrawn in place: one line in all


def test_the_progress_lines_are_periodic_without_a_terminal() -> None:
    stream = io.StringIO()
    bar = ProgressBar(OutputWrapper(stream), "f.jsonl", tty=False)
    for done in range(1001):
        bar(done, 1000)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "f.jsonl: 0/1000 turns (0%)"
    assert lines[-1] == "f.jsonl: 1000/1000 turns (100%)"
    assert len(lines) < 10


def test_a_turn_stored_meanwhile_by_another_import_is_skipped(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.dumps(CHAT[:1]).encode()
    transcript_import(project=world.project, data=data, name="chat.json")
    # As if a concurrent import stored the turn after this one looked: turn_ingest sees it.
    monkeypatch.setattr(importing, "_imported_turns", lambda **kwargs: {})
    result = transcript_import(project=world.project, data=data, name="chat.json")
    [session] = result.sessions
    assert (session.turns, session.skipped) == (0, 1)
    assert session.peak_tokens == Turn.objects.get().total_tokens
    assert stored_turns(world) == 1


# --- imports as jobs ----------------------------------------------------------------------------


def long_session(turns: int, bad_at: int | None = None) -> list[dict[str, Any]]:
    """One OpenAI-chat transcript session of ``turns`` model calls; a NUL in call ``bad_at``."""
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        text = f"step {n}: go on" + ("\x00" if n == bad_at else "")
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": f"ok {n}"}]
    return [{"id": "long", "messages": messages}]


def test_a_background_import_answers_202_and_its_job_tells_the_outcome(world: World) -> None:
    data = json.dumps(CHAT[:1]).encode()
    client = world.api(world.ingest_key)
    with TestCase.captureOnCommitCallbacks(execute=False) as pending:
        response = client.post(
            "/api/v1/import", {"file": SimpleUploadedFile("c.json", data), "background": "true"}
        )
    assert response.status_code == 202
    job = response.json()
    assert (job["status"], job["progress"], job["sessions"]) == (
        "queued",
        {"done": 0, "total": None, "percent": None},
        None,
    )
    assert response["Location"] == job["url"] == f"/api/v1/imports/{job['id']}"
    assert stored_turns(world) == 0  # nothing until the job runs
    for callback in pending:
        callback()
    done = client.get(job["url"]).json()
    assert done["status"] == "succeeded"
    assert done["format"] == "openai-chat"
    assert [s["external_id"] for s in done["sessions"]] == ["good"]
    assert done["started_at"] is not None
    assert done["finished_at"] is not None
    listed = client.get("/api/v1/imports").json()
    assert listed["count"] == 1
    assert listed["results"][0]["id"] == job["id"]
    assert world.api(world.outsider_key).get(job["url"]).status_code == 404
    assert client.get("/api/v1/imports/²").status_code == 404


def test_a_long_session_is_committed_in_chunks_and_a_failed_import_resumes(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importing, "CHUNK_TURNS", 4)
    bad = json.dumps(long_session(10, bad_at=9)).encode()
    response = upload(world, bad, "long.json")
    assert response.status_code == 400
    assert next(iter(response.json()["error"]["fields"])).startswith("sessions.0.turns.9")
    assert "importing again resumes" in response.json()["error"]["message"]
    assert stored_turns(world) == 8  # two chunks of 4 committed; the third rolled back
    failed = world.api(world.ingest_key).get("/api/v1/imports").json()["results"][0]
    assert failed["status"] == "failed"
    assert failed["error"]["field"].startswith("sessions.0.turns.9")
    assert failed["progress"]["done"] == 9  # the turns before the bad one were stored or tried

    fixed = json.dumps(long_session(10)).encode()
    again = imported(world, fixed, "long.json")
    assert [(s["turns"], s["skipped"]) for s in again["sessions"]] == [(2, 8)]
    assert stored_turns(world) == 10


def test_a_job_for_an_unknown_format_is_refused_before_it_is_recorded(world: World) -> None:
    response = upload(world, b"[]", "x.json", format="nope")
    assert response.status_code == 400
    assert "format" in response.json()["error"]["fields"]
    assert world.api(world.ingest_key).get("/api/v1/imports").json()["count"] == 0


def test_a_file_over_the_inline_size_imports_in_the_background(world: World, settings: Any) -> None:
    settings.CTXWEB_IMPORT_INLINE_BYTES = 100
    data = json.dumps(CHAT[:1]).encode()
    assert len(data) > 100
    response = upload(world, data, "c.json")
    assert response.status_code == 202
    done = world.api(world.ingest_key).get(response.json()["url"]).json()
    assert done["status"] == "succeeded"
    assert done["progress"]["percent"] == 100


# --- the imports page ---------------------------------------------------------------------------


def test_the_imports_page_uploads_and_lists_with_progress(world: World) -> None:
    client = world.login(world.owner)
    empty = client.get("/imports/")
    assert empty.status_code == 200
    assert b"No imports yet" in empty.content
    assert b'enctype="multipart/form-data"' in empty.content
    data = json.dumps(CHAT[:1]).encode()
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.post(
            "/imports/", {"file": SimpleUploadedFile("chat.json", data), "format": "auto"}
        )
    assert response.status_code == 302
    page = client.get("/imports/")
    text = page.content.decode()
    assert "chat.json" in text
    assert "status-succeeded" in text
    assert 'aria-valuenow="100"' in text
    assert "/sessions/good/" in text
    assert "Importing chat.json" in text  # the flash message
    assert stored_turns(world) == 1


def test_the_imports_page_shows_a_form_error_and_a_failed_job(world: World) -> None:
    client = world.login(world.owner)
    missing = client.post("/imports/", {"format": "auto"})
    assert missing.status_code == 400
    assert b"This field is required" in missing.content
    data = json.dumps(long_session(3, bad_at=1)).encode()
    with TestCase.captureOnCommitCallbacks(execute=True):
        client.post("/imports/", {"file": SimpleUploadedFile("bad.json", data)})
    text = client.get("/imports/").content.decode()
    assert "status-failed" in text
    assert "sessions.0.turns.1" in text


def test_a_viewer_sees_the_imports_but_may_not_upload(world: World) -> None:
    client = world.login(world.teammate)
    page = client.get("/imports/")
    assert page.status_code == 200
    assert b'enctype="multipart/form-data"' not in page.content
    data = json.dumps(CHAT[:1]).encode()
    refused = client.post("/imports/", {"file": SimpleUploadedFile("c.json", data)})
    assert refused.status_code == 403
    assert stored_turns(world) == 0
