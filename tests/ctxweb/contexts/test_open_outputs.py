"""The open outputs a turn's assistant text may refer to (``_OpenOutputs``): found through the
index of their probes exactly as a search for every probe finds them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxweb.contexts.services.attribution import OPEN_OUTPUTS, PROBE_MIN, _OpenOutputs

_WORDS = st.sampled_from(["src/app.py", "def main():", "  return x", "error: ", "ok", "\n", " "])
_PROBES = st.lists(_WORDS, min_size=1, max_size=8).map("".join)
_OUTPUTS = st.lists(st.lists(_PROBES, max_size=5), max_size=30)


def _searched(outputs: _OpenOutputs, text: str) -> set[int]:
    return {pk for pk, probes in outputs if any(probe in text for probe in probes)}


@given(_OUTPUTS, st.lists(_WORDS, max_size=40).map("".join), st.data())
def test_the_index_finds_what_a_search_of_every_probe_finds(
    probes: list[list[str]], filler: str, data: st.DataObject
) -> None:
    outputs = _OpenOutputs(enumerate(probes, start=1))
    quoted = data.draw(st.lists(st.sampled_from([p for ps in probes for p in ps] or [""])))
    text = filler.join(["", *quoted, ""])
    assert outputs.referenced(text) == _searched(outputs, text)
    assert outputs.indexed == sum(map(len, outputs.heads.values()))
    gone = data.draw(st.sets(st.sampled_from(list(range(1, len(probes) + 2)))))
    outputs.remove(gone)
    assert outputs.indexed == sum(map(len, outputs.heads.values()))
    assert not outputs.referenced(text) & gone
    assert outputs.referenced(text) == _searched(outputs, text)


def test_a_long_text_is_searched_probe_by_probe_alike() -> None:
    outputs = _OpenOutputs([(1, ["x" * PROBE_MIN + "needle"]), (2, ["y" * (PROBE_MIN + 3)])])
    text = "a" * 10_000 + "x" * PROBE_MIN + "needle" + "b" * 10_000
    assert outputs.referenced(text) == {1}
    assert outputs.referenced(text[:-10_000]) == {1}  # short enough for the index


def test_the_newest_are_kept_and_removed_ones_are_forgotten() -> None:
    outputs = _OpenOutputs((pk, [f"{pk:0{PROBE_MIN}d}"]) for pk in range(OPEN_OUTPUTS + 5))
    assert len(outputs) == OPEN_OUTPUTS
    assert outputs.referenced(f"{0:0{PROBE_MIN}d} {4:0{PROBE_MIN}d}") == set()
    assert outputs.referenced(f"see {5:0{PROBE_MIN}d}") == {5}
    outputs.remove([5])
    assert outputs.referenced(f"see {5:0{PROBE_MIN}d}") == set()
    assert len(outputs.heads) == OPEN_OUTPUTS - 1
