"""ctxweb-auto keeps URLs as it keeps paths and error names: when the room left cannot hold a long
URL whole, it writes it short (its host and path, or its host and last path segment) rather
than not at all, and no path or error name gives way for it."""

from __future__ import annotations

import pytest

from compaction.strategies import get_strategy
from compaction.strategies.ctxweb_auto._facts import message_facts, part_facts, short_url
from tests.support.messages import atc, ctx, sys, t, u

WHEEL = (
    "https://files.pythonhosted.org/packages/5b/2b/d36d57c66ff031f93b4fa432e86802f84991477e522a"
    "dcdffd314454326b/torch-2.7.1-cp311-none-macosx_11_0_arm64.whl.metadata"
)
SIGNED = (
    "https://storage.example.com/exports/report.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20261127&X-Amz-Signature=9f2c1e8d7b6a5f4e3d2c1b0a"
)


@pytest.mark.parametrize(
    ("url", "short"),
    [
        # the query and fragment go first
        ("https://x.org/a/b?session=1f2e3d4c#top", "https://x.org/a/b"),
        ("https://x.org?q=1", "https://x.org"),
        (SIGNED, "https://storage.example.com/exports/report.csv"),
        # still long: the host and the last segment, the middle elided
        (
            WHEEL,
            "https://files.pythonhosted.org/…/torch-2.7.1-cp311-none-macosx_11_0_arm64.whl.metadata",
        ),
        ("http://h.io/a/b/c/" + "d" * 60 + "/", "http://h.io/…/" + "d" * 60),
        # nothing shorter keeps it
        ("https://x.org/a/b", None),
        ("http://web.chal.csaw.io:8000/cgi-bin/file.pl", None),
        ("https://x.org/a/" + "d" * 60, None),  # two segments: nothing to elide
        ("https:///nohost?x=1", None),
    ],
)
def test_a_long_url_is_written_short_keeping_its_host(url, short):
    assert short_url(url) == short


def test_a_short_url_is_still_read_as_a_url_of_the_same_host():
    found = {
        text for kind, text in part_facts(u(f"see {short_url(WHEEL)}").parts[0]) if kind == "urls"
    }
    assert found == {short_url(WHEEL)}


def _context(urls):
    """Six old turns, each running a tool whose output names a file, an error, a few names and
    ``urls[i]`` amid 400 words with no fact (its first line holds none: an externalized output's
    description quotes it), then a latest turn."""
    messages = [sys("You are an agent.")]
    for i, url in enumerate(urls):
        output = (
            f"fetch log\nfetched {url}\nwrote out/step_{i}.json; Fetch{i}Error on retry; "
            f"uses load_part_{i} and save_part_{i}\n" + "words. " * 400
        )
        messages += [u(f"step {i}"), atc(f"c{i}", name="fetch"), t(f"c{i}", output)]
    messages += [u("now summarize what you fetched")]
    return ctx(*messages)


def _facts(messages):
    found = set()
    for message in messages:
        found |= message_facts(message)
    return found


def _plans(context, counter):
    """ctxweb-auto up to pruning, from a target its floor misses to one that leaves room for
    every fact but a few URLs."""
    for target in range(440, 1000, 20):
        plan = get_strategy("ctxweb-auto").plan(
            context, {"target_tokens": target, "max_step": "prune"}, counter=counter
        )
        yield target, plan


@pytest.mark.parametrize(
    "urls",
    [
        [SIGNED.replace("report", f"report_{i}") for i in range(6)],
        [WHEEL.replace("torch", f"torch{i}") for i in range(6)],
    ],
    ids=["signed", "wheel"],
)
def test_with_little_room_a_long_url_is_written_short_never_for_a_path_or_an_error(counter, urls):
    context = _context(urls)
    wanted = _facts(context.messages)
    paths_and_errors = {f for f in wanted if f[0] in ("files", "errors")}
    seen = {"whole": 0, "short": 0}
    for target, plan in _plans(context, counter):
        visible = _facts(plan.context.messages)
        whole = [url for url in urls if ("urls", url) in visible]
        short = [url for url in urls if ("urls", short_url(url)) in visible]
        seen["whole"] += len(whole)
        seen["short"] += len(short)
        if not (whole or short):
            continue
        assert plan.after.total <= target
        # a URL, whole or short, is written only once every path and error name is
        assert paths_and_errors <= visible, target
        # written short: its host and path (or last segment), never its query
        assert not set(whole) & set(short)
        # the edits say how many URLs they wrote short
        said = [e.detail.split(" and ")[-1] for e in plan.edits if "written short" in e.detail]
        assert sum(int(x.split()[0]) for x in said) == len(short)
    assert seen["whole"], seen
    assert seen["short"], seen


def test_a_url_written_short_still_counts_as_lost(counter):
    urls = [SIGNED.replace("report", f"report_{i}") for i in range(6)]
    context = _context(urls)
    wanted = _facts(context.messages)
    counted = False
    for _target, plan in _plans(context, counter):
        visible = _facts(plan.context.messages)
        if not any(("urls", short_url(url)) in visible for url in urls):
            continue
        counted = True
        warning = next(w for w in plan.warnings if "no longer fit in the context" in w)
        # every fact of the input not visible whole, the URLs written short among them
        assert int(warning.removeprefix("ctxweb-auto: ").split(" of ")[0]) == len(wanted - visible)
    assert counted
