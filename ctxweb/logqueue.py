"""A web process's log lines written by a thread of their own, never by the event loop.

Every request the server answers logs a line (uvicorn's access log), and the relay logs its
warnings, on the event loop. Written there, a line waits for its output: a file on a disk whose
journal the database's writes keep busy, a pipe its reader empties late. Under the hostile load
(``bench/hostile.py``), a watchdog that looked at the event loop whenever it was late by 30 ms or
more found it writing a log line in one look out of nine, and every caller and the health check
waited with it. Here the root logger's handlers are fed from a bounded queue by one thread
(:class:`logging.handlers.QueueListener`); the loop only formats the record and puts it in the
queue. When the queue is full (the output has not kept up with :data:`QUEUED_RECORDS` lines),
a line is dropped rather than waited for, and the next line that fits is preceded by a warning
saying how many were.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from logging.handlers import QueueHandler, QueueListener

#: Log records waiting for their thread at most; past it, records are dropped and counted.
QUEUED_RECORDS = 10_000

logger = logging.getLogger("ctxweb.logqueue")


class DroppingQueueHandler(QueueHandler):
    """A :class:`QueueHandler` that never waits: a record that does not fit is dropped and
    counted, and the count goes out as a warning ahead of the next record that fits."""

    def __init__(self, records: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(records)
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            if self.dropped:
                self.queue.put_nowait(self._dropped_record())
                self.dropped = 0
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1

    def _dropped_record(self) -> logging.LogRecord:
        return logger.makeRecord(
            logger.name,
            logging.WARNING,
            __file__,
            0,
            "%d log records were dropped: the log's output did not keep up",
            (self.dropped,),
            None,
        )


def logs_off_the_loop(size: int = QUEUED_RECORDS) -> Callable[[], None]:
    """Have the root logger's handlers written by a thread, fed by a queue of ``size`` records;
    returns what puts them back (the records queued are written first)."""
    root = logging.getLogger()
    handlers = [h for h in root.handlers if not isinstance(h, QueueHandler)]
    if not handlers:
        return lambda: None
    records: queue.Queue[logging.LogRecord] = queue.Queue(size)
    listener = QueueListener(records, *handlers, respect_handler_level=True)
    feeding = DroppingQueueHandler(records)
    listener.start()
    for handler in handlers:
        root.removeHandler(handler)
    root.addHandler(feeding)

    def stop() -> None:
        root.removeHandler(feeding)
        listener.stop()  # writes what is queued, then its thread ends
        for handler in handlers:
            root.addHandler(handler)
        if feeding.dropped:
            logger.warning("%d log records were dropped at the end", feeding.dropped)

    return stop
