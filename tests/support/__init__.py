"""What the tests and the benchmarks share, in one place: where the real transcripts are
(:mod:`.transcripts`), the personas of the HTTP tests (:mod:`.world`), request builders
(:mod:`.builders`), the route matrix (:mod:`.routes`), live servers (:mod:`.servers`) and the
headless browser (:mod:`.browser`).

Test modules import from here, never from one another; fixtures live in the ``conftest.py``
files. ``bench/`` uses :mod:`.transcripts` and :mod:`.servers` too.
"""
