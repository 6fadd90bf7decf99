"""The process's SQLite write turn (:mod:`ctxweb.dbwrites`): background writers take turns, and a
thread already inside a transaction never waits for one (it may hold the database's lock that
the turn's holder waits for)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from ctxweb.dbwrites import sqlite_writing


def held_elsewhere() -> tuple[threading.Event, threading.Event]:
    """A thread holding the write turn until told to let go: (taken, let_go)."""
    taken, let_go = threading.Event(), threading.Event()

    def hold() -> None:
        with sqlite_writing():
            taken.set()
            let_go.wait(60)

    threading.Thread(target=hold, daemon=True).start()
    assert taken.wait(10)
    return taken, let_go


@pytest.mark.django_db(transaction=True)
def test_a_writer_outside_a_transaction_waits_for_the_turn() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the write turn is SQLite's only")
    _, let_go = held_elsewhere()
    entered = threading.Event()

    def write() -> None:
        with sqlite_writing():
            entered.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert not entered.wait(0.3)  # behind the holder
    let_go.set()
    assert entered.wait(10)
    writer.join(10)


@pytest.mark.django_db(transaction=True)
def test_a_thread_inside_a_transaction_goes_on_without_the_turn() -> None:
    _, let_go = held_elsewhere()
    through = threading.Event()

    def write() -> None:
        try:
            with transaction.atomic(), sqlite_writing():
                through.set()
        finally:
            connection.close()

    try:
        threading.Thread(target=write, daemon=True).start()
        assert through.wait(10), "waited for the turn from inside a transaction"
    finally:
        let_go.set()
