"""``python -m tests.services DATABASE_URL REDIS_URL``: exit 0 when both services answer.

`make test` uses it to decide whether to run the production-shape pass (PostgreSQL,
channels-redis, a real Celery worker) after the embedded one.
"""

from __future__ import annotations

import sys


def reachable(database_url: str, redis_url: str) -> list[str]:
    """The services that do not answer, each with the reason."""
    problems: list[str] = []
    try:
        import psycopg

        with psycopg.connect(
            database_url.replace("postgres://", "postgresql://"), connect_timeout=3
        ):
            pass
    except Exception as exc:  # any failure means "not usable here"
        problems.append(f"PostgreSQL at {database_url}: {exc}")
    try:
        import redis

        redis.Redis.from_url(redis_url, socket_connect_timeout=3).ping()
    except Exception as exc:
        problems.append(f"Redis at {redis_url}: {exc}")
    return problems


if __name__ == "__main__":
    problems = reachable(sys.argv[1], sys.argv[2])
    for problem in problems:
        print(f"unreachable: {problem}", file=sys.stderr)
    raise SystemExit(1 if problems else 0)
