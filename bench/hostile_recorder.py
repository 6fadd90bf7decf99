"""What recording a relayed call costs the recorder: the hostile benchmark's calls, spooled and
queued as the relay does, then recorded by the embedded shape's recorder loop in this process;
CPU seconds per recorded call, and optionally a cProfile of it.

Usage: ``.venv/bin/python bench/hostile_recorder.py [--lanes 32] [--calls 8] [--big 0]
[--big-mb 24] [--shape embedded|production] [--profile out.prof]``

``--lanes`` sessions of ``--calls`` streamed calls each, a growing conversation (the callers of
:mod:`hostile_load`, their answers those of :mod:`hostile_upstream`), queued lane after lane as
they would be relayed (call 1 of every lane, then call 2, ...); then ``--big`` managed-size calls
of ``--big-mb`` MB to one session (those of ``hostile_load._big_managed``, without an operation
applied). The recorder loop (``recorder_loop(once=True)``) records them all; the queue is then
empty and every call a turn (checked). Prints the CPU seconds (``time.process_time``) of the
small calls and of the big ones, per call. ``--shape production`` records on a
``ctxweb_bench_recorder`` database created on ``$BENCH_POSTGRES_URL`` and dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

BENCH_DB = "ctxweb_bench_recorder"


def stream_answer(size: int) -> bytes:
    """The stand-in upstream's streamed answer to a request of ``size`` bytes."""
    from hostile_upstream import ANSWER, CHUNKS, _chunk, _usage

    model = "gpt-4o"
    parts = [_chunk(model, {"role": "assistant", "content": ""})]
    step = len(ANSWER) // CHUNKS + 1
    parts += [
        _chunk(model, {"content": ANSWER[start : start + step]})
        for start in range(0, len(ANSWER), step)
    ]
    usage = {
        "id": "chatcmpl-hostile",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [],
        "usage": _usage(size),
    }
    parts.append(_chunk(model, {}, "stop"))
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def big_body(n: int, mb: int) -> bytes:
    """``hostile_load._big_managed``'s ``n``-th request."""
    from hostile_load import managed_history

    history = json.dumps(managed_history()[-1]).encode()[:-1]
    filler = ("The build log of the whole monorepo, kept verbatim. " * 20 + "\\n").encode()
    big = filler * (mb * 1024 * 1024 // len(filler))
    unique = f"caller 0 call {n}: ".encode()
    return (
        b'{"model": "gpt-4o", "messages": '
        + history
        + b', {"role": "user", "content": "'
        + unique
        + big
        + b'"}]}'
    )


def queue(project_id: int, key_id: int, session: str, body: bytes, answer: bytes) -> None:
    from ctxweb.contexts.services import recording

    spooled = recording.recording_spool(
        project_id=project_id,
        key_id=key_id,
        format="openai-chat",
        streamed=True,
        session=session,
        original=(),
        events=[],
        content_encoding="",
        headers=[("Content-Type", "application/json")],
        length=None,
        request_body=body,
    )
    recording.answer_path(spooled.spool).write_bytes(answer)
    recording.recording_queue(
        project_id=project_id,
        key_id=key_id,
        spool=spooled.spool,
        call=spooled.call,
        request_bytes=len(body),
        answer_bytes=len(answer),
        complete=True,
    )


def record(profile: str | None) -> tuple[int, float, float]:
    """Record everything queued: calls, CPU seconds, wall seconds."""
    from ctxweb.contexts.services import recording

    cpu, wall = time.process_time(), time.perf_counter()
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        done = profiler.runcall(recording.recorder_loop, once=True)
        profiler.dump_stats(profile)
    else:
        done = recording.recorder_loop(once=True)
    return done, time.process_time() - cpu, time.perf_counter() - wall


def run(args: argparse.Namespace) -> dict[str, Any]:
    import django

    django.setup()
    from django.core.management import call_command
    from hostile_load import chat_body, conversation

    from ctxweb.accounts.models import Project
    from ctxweb.contexts.models import PendingCall, Session

    call_command("migrate", verbosity=0)
    project = Project.objects.create(name="bench")
    result: dict[str, Any] = {}
    for k in range(1, args.calls + 1):
        body = chat_body(conversation(k))
        answer = stream_answer(len(body))
        for lane in range(args.lanes):
            queue(project.pk, 1, f"lane-{lane:02d}", body, answer)
    done, cpu, wall = record(args.profile and args.profile + ".small")
    turns = sum(s.turns.count() for s in Session.objects.filter(external_id__startswith="lane-"))
    assert turns == args.lanes * args.calls == done, (turns, done)
    result["small"] = {"calls": done, "cpu": cpu, "wall": wall}
    if args.big:
        for n in range(1, args.big + 1):
            body = big_body(n, args.big_mb)
            queue(project.pk, 2, "big", body, stream_answer(len(body)))
        done, cpu, wall = record(args.profile and args.profile + ".big")
        assert done == args.big, done
        assert Session.objects.get(external_id="big").turns.count() == args.big
        result["big"] = {"calls": done, "cpu": cpu, "wall": wall}
    assert not PendingCall.objects.exists()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", type=int, default=32)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--big", type=int, default=0)
    parser.add_argument("--big-mb", type=int, default=24)
    parser.add_argument("--shape", choices=["embedded", "production"], default="embedded")
    parser.add_argument("--profile", help="write cProfile stats to this file (.small, .big)")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="ctxweb-bench-recorder-"))
    from tests.support.servers import embedded_env

    env = embedded_env(data, CTXWEB_RECORDER="process")
    if args.shape == "production":
        import psycopg
        from hostile import postgres_admin_url

        with psycopg.connect(postgres_admin_url(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {BENCH_DB}")
        env["DATABASE_URL"] = postgres_admin_url().rsplit("/", 1)[0] + f"/{BENCH_DB}"
        env["CTXWEB_RECORDER"] = "process"  # this process records, not a Celery worker
    os.environ.clear()
    os.environ.update(env)
    try:
        result = run(args)
    finally:
        if args.shape == "production":
            from django.db import connections

            connections.close_all()
            with psycopg.connect(postgres_admin_url(), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    for kind, measured in result.items():
        print(
            f"{kind}: {measured['calls']} calls, {measured['cpu']:.2f} CPU s"
            f" ({1000 * measured['cpu'] / measured['calls']:.1f} ms a call),"
            f" {measured['wall']:.2f} s wall"
        )


if __name__ == "__main__":
    main()
