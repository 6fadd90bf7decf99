"""Secrets in messages: credentials found by kind and place, never by value, and masked.

The rules are ported from gitleaks' default rule set (``config/gitleaks.toml``, MIT licence,
github.com/gitleaks/gitleaks): AWS access keys, GitHub, GitLab, Slack, Stripe, Google, Hugging
Face and npm tokens, OpenAI and Anthropic API keys, private key blocks and JWTs, with gitleaks' own
ids as kinds. Four rules are ctxweb's own, for what agents' contexts hold and gitleaks leaves to
its generic rule: ``authorization-header`` (the credential after ``Authorization: Bearer|Basic|
Token``, or after an ``x-api-key`` header), ``aws-secret-access-key`` (the 40 characters after an
``aws_secret_access_key`` name), ``openai-project-key`` (``sk-proj-`` keys without gitleaks'
``T3BlbkFJ`` marker) and ``uri-password``: the password of a URI's credentials
(``postgres://admin:<password>@host/db``, ``amqp://``, ``redis://:<password>@``, ``https://``),
the password only, so the mask keeps the scheme, user and host readable; a URI without a
password, or whose password is a mask already or a ``${VARIABLE}``, is no finding. Each rule runs
only when one of its keywords is in the text, as gitleaks does, so a text without any costs one
lower-cased copy and a substring search per keyword.

Messages are scanned in every text a caller wrote: text, reasoning, tool-call arguments, tool
results, a media part's URL, and every string of their ``extra`` (the keys a format carries that
the model has no field for, an item kept verbatim); any other JSON value (a request's options,
tool definitions, a response) is scanned string by string with :func:`scan_value` and masked with
:func:`mask_value`. Object keys are names, not values, and are not scanned; nor is media data.

A :class:`Finding` says what was found (``kind``, ``message``) and where: the part's ``field``
(``parts.2.content.0.text``) and ``start``/``end`` offsets in that text. :func:`mask_message`
replaces every finding with ``[SECRET:<kind>]`` and returns the findings with the offsets of the
masks in the masked text.

>>> findings = scan_text("export AWS_ACCESS_KEY_ID=AKIAQYLPMN5HFIQR7BX2")
>>> [(f.kind, f.start, f.end) for f in findings]
[('aws-access-token', 25, 45)]
>>> mask_text("id AKIAQYLPMN5HFIQR7BX2 here", findings_in("id AKIAQYLPMN5HFIQR7BX2 here"))
'id [SECRET:aws-access-token] here'
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.messages import (
    MediaPart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from compaction.messages._common import RAW, RAW_VALUE, raw_of, raw_value_of

__all__ = [
    "RULES",
    "Finding",
    "Rule",
    "findings_in",
    "mask_message",
    "mask_parts",
    "mask_text",
    "mask_value",
    "scan_message",
    "scan_parts",
    "scan_text",
    "scan_value",
]


@dataclass(frozen=True)
class Rule:
    """One kind of secret: a pattern whose ``group`` is the secret, run when a keyword is seen."""

    kind: str
    message: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    group: int = 0


@dataclass(frozen=True)
class Finding:
    """A secret's kind, what it is in words, and where it lies (never the value itself)."""

    kind: str
    message: str
    start: int
    end: int
    field: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "message": self.message,
            "start": self.start,
            "end": self.end,
            "field": self.field,
        }


def _rule(kind: str, message: str, pattern: str, *keywords: str, group: int = 0) -> Rule:
    return Rule(kind, message, re.compile(pattern), tuple(k.lower() for k in keywords), group)


#: gitleaks' rules (kind = gitleaks id), then ctxweb's own, in the order they are tried.
RULES: tuple[Rule, ...] = (
    _rule(
        "private-key",
        "Private key block",
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S-]{64,}?KEY(?: BLOCK)?-----",
        "-----BEGIN",
    ),
    _rule(
        "aws-access-token",
        "AWS access key id",
        r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
        "a3t",
        "akia",
        "asia",
        "abia",
        "acca",
        group=1,
    ),
    _rule("github-pat", "GitHub personal access token", r"ghp_[0-9a-zA-Z]{36}", "ghp_"),
    _rule(
        "github-fine-grained-pat",
        "GitHub fine-grained personal access token",
        r"github_pat_\w{82}",
        "github_pat_",
    ),
    _rule("github-oauth", "GitHub OAuth access token", r"gho_[0-9a-zA-Z]{36}", "gho_"),
    _rule("github-app-token", "GitHub app token", r"(?:ghu|ghs)_[0-9a-zA-Z]{36}", "ghu_", "ghs_"),
    _rule("github-refresh-token", "GitHub refresh token", r"ghr_[0-9a-zA-Z]{36}", "ghr_"),
    _rule("gitlab-pat", "GitLab personal access token", r"glpat-[\w-]{20}", "glpat-"),
    _rule(
        "anthropic-api-key",
        "Anthropic API key",
        r"\b(sk-ant-api03-[a-zA-Z0-9_\-]{93}AA)(?:[\x60'\"\s;]|\\[nr]|$)",
        "sk-ant-api03",
        group=1,
    ),
    _rule(
        "anthropic-admin-api-key",
        "Anthropic admin API key",
        r"\b(sk-ant-admin01-[a-zA-Z0-9_\-]{93}AA)(?:[\x60'\"\s;]|\\[nr]|$)",
        "sk-ant-admin01",
        group=1,
    ),
    _rule(
        "openai-api-key",
        "OpenAI API key",
        r"\b(sk-(?:(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ"
        r"(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\b|[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20}))"
        r"(?:[\x60'\"\s;]|\\[nr]|$)",
        "T3BlbkFJ",
        group=1,
    ),
    _rule(
        "slack-bot-token",
        "Slack bot token",
        r"xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*",
        "xoxb",
    ),
    _rule(
        "slack-user-token",
        "Slack user token",
        r"xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}",
        "xoxp-",
        "xoxe-",
    ),
    _rule(
        "stripe-access-token",
        "Stripe secret key",
        r"\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})(?:[\x60'\"\s;]|\\[nr]|$)",
        "sk_test",
        "sk_live",
        "sk_prod",
        "rk_test",
        "rk_live",
        "rk_prod",
        group=1,
    ),
    _rule("gcp-api-key", "Google API key", r"\b(AIza[\w-]{35})(?:[\x60'\"\s;]|$)", "aiza", group=1),
    _rule("huggingface-access-token", "Hugging Face token", r"\bhf_[a-zA-Z]{34}\b", "hf_"),
    _rule("npm-access-token", "npm access token", r"(?i)\bnpm_[a-z0-9]{36}\b", "npm_"),
    _rule(
        "jwt",
        "JSON Web Token",
        r"\b(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?)"
        r"(?:[\x60'\"\s;]|\\[nr]|$)",
        "eyj",
        group=1,
    ),
    # ctxweb's own rules.
    _rule(
        "openai-project-key",
        "OpenAI project API key",
        r"\b(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,})",
        "sk-proj-",
        "sk-svcacct-",
        "sk-admin-",
        group=1,
    ),
    _rule(
        "aws-secret-access-key",
        "AWS secret access key",
        r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        "aws_secret_access_key",
        "awssecretaccesskey",
        "aws_secretaccesskey",
        group=1,
    ),
    _rule(
        "authorization-header",
        "Credentials of an Authorization header",
        r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|basic|token|digest)\s+"
        r"([A-Za-z0-9._~+/=:-]{8,})",
        "authorization",
        group=1,
    ),
    _rule(
        "authorization-header",
        "Credentials of an API key header",
        r"(?i)\bx-(?:api|goog-api|ctxweb)-key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9._~+/=-]{8,})",
        "-key",
        group=1,
    ),
    _rule(
        "uri-password",
        "Password in a URI's credentials",
        # scheme://user:password@host, the slashes maybe JSON-escaped; user and password stop at
        # what ends a URI's authority (and at quotes, so a mask never splits a JSON string), so
        # each character is read by one attempt at most: linear in the text. Not a finding: a
        # password that is a mask already or a variable (``${DB_PASSWORD}``, ``$PASSWORD``).
        r":(?:\\?/){2}[^\s:/?#@'\"\\<>]{0,256}:"
        r"(?!\[SECRET:|\$\{[^}@\s]*\}@|\$[A-Za-z_]\w*@)([^\s/?#@'\"<>]{1,256})@[^\s/?#@'\"<>]",
        "://",
        ":\\/\\/",
        group=1,
    ),
)


def findings_in(text: str, field: str = "") -> list[Finding]:
    """The secrets in ``text``, in order of their start, overlaps removed (the first rule to
    match a place keeps it: a JWT in an ``Authorization`` header is a JWT)."""
    lowered = text.lower()
    found: list[Finding] = []
    # The places kept so far, disjoint and by start (so their ends are in order too): a new
    # place overlaps one iff the last kept place starting before its end ends after its start.
    # One look per match, not a pass over every kept place (text full of header-like words has
    # a match every few characters).
    starts: list[int] = []
    ends: list[int] = []
    for rule in RULES:
        if not any(keyword in lowered for keyword in rule.keywords):
            continue
        for match in rule.pattern.finditer(text):
            start, end = match.span(rule.group)
            at = bisect.bisect_left(starts, end)
            if at and ends[at - 1] > start:
                continue
            starts.insert(at, start)
            ends.insert(at, end)
            found.append(Finding(rule.kind, rule.message, start, end, field))
    return sorted(found, key=lambda f: f.start)


def scan_text(text: str) -> list[Finding]:
    """The secrets in ``text`` (see :func:`findings_in`)."""
    return findings_in(text)


def mask_text(text: str, findings: Sequence[Finding]) -> str:
    """``text`` with each finding replaced by ``[SECRET:<kind>]``."""
    return _masked(text, findings)[0]


def _masked(text: str, findings: Sequence[Finding]) -> tuple[str, list[Finding]]:
    pieces: list[str] = []
    moved: list[Finding] = []
    at = 0
    length = 0
    for finding in sorted(findings, key=lambda f: f.start):
        before = text[at : finding.start]
        pieces.append(before)
        length += len(before)
        mask = f"[SECRET:{finding.kind}]"
        pieces.append(mask)
        moved.append(dataclasses.replace(finding, start=length, end=length + len(mask)))
        length += len(mask)
        at = finding.end
    pieces.append(text[at:])
    return "".join(pieces), moved


#: A place in a JSON value: (the container's place or None at the top, the key or index in
#: it, the value there). Places point up, so a path is spelled only where a secret is found.
_Place = tuple[Any, Any, Any]


def _strings(value: object) -> Iterator[tuple[_Place, str]]:
    """Every string of a JSON ``value`` (not object keys) with its place, at any depth."""
    stack: list[_Place] = [(None, None, value)]
    while stack:
        place = stack.pop()
        item = place[2]
        if isinstance(item, str):
            yield place, item
        elif isinstance(item, Mapping):
            stack += [(place, k, v) for k, v in reversed(list(item.items()))]
        elif isinstance(item, list | tuple):
            stack += [(place, i, v) for i, v in reversed(list(enumerate(item)))]


def _path(place: _Place, field: str) -> str:
    """The field path of ``place`` under ``field`` (``metadata.tags.1``)."""
    keys: list[str] = []
    while place[0] is not None:
        keys.append(str(place[1]))
        place = place[0]
    return ".".join([field, *reversed(keys)] if field else reversed(keys))


def scan_value(value: object, field: str = "") -> list[Finding]:
    """The secrets in every string of a JSON ``value`` (a request's options, tool definitions,
    a response), each with its path under ``field`` (``metadata.note``, ``0.description``).

    >>> [(f.kind, f.field) for f in scan_value({"db": ["postgres://app:pw@db/app"]}, "request")]
    [('uri-password', 'request.db.0')]
    """
    found: list[Finding] = []
    for place, text in _strings(value):
        here = findings_in(text)
        if here:
            path = _path(place, field)
            found += [dataclasses.replace(f, field=path) for f in here]
    return found


def mask_value(value: Any, field: str = "") -> tuple[Any, list[Finding]]:
    """``value`` with every secret in its strings masked, and the findings at the masks'
    offsets. What holds a secret is copied (objects as dicts, arrays as lists), the rest shared;
    ``value`` itself is never changed. Any depth: nothing here recurses.

    >>> mask_value({"url": "redis://:hunter2@cache:6379"})[0]
    {'url': 'redis://:[SECRET:uri-password]@cache:6379'}
    """
    out: list[Finding] = []
    root: list[Any] = [value]
    copies: dict[int, Any] = {}
    for place, text in _strings(value):
        here = findings_in(text)
        if not here:
            continue
        path = _path(place, field)
        masked, moved = _masked(text, [dataclasses.replace(f, field=path) for f in here])
        out += moved
        # Copy the containers from the string up to the first one copied already (or the top).
        child: _Place = place
        new: Any = masked
        while True:
            parent = child[0]
            if parent is None:
                root[0] = new
                break
            container = parent[2]
            copy = copies.get(id(container))
            if copy is not None:
                copy[child[1]] = new
                break
            copy = dict(container) if isinstance(container, Mapping) else list(container)
            copies[id(container)] = copy
            copy[child[1]] = new
            child, new = parent, copy
    return root[0], out


def _mirrored(part: Part) -> str | None:
    """The ``extra`` key of a verbatim item whose JSON is the part's text (scanned and masked
    there, then read back from it), else None."""
    if not isinstance(part, TextPart):
        return None
    if raw_of(part) is not None:
        return RAW
    if raw_value_of(part)[0]:
        return RAW_VALUE
    return None


def _texts(parts: Sequence[Part], prefix: str) -> list[tuple[str, str]]:
    """Every scanned text of ``parts``, with its field path."""
    texts: list[tuple[str, str]] = []
    for at, part in enumerate(parts):
        if isinstance(part, TextPart | ReasoningPart):
            texts.append((f"{prefix}{at}.text", part.text))
        elif isinstance(part, ToolCallPart):
            texts.append((f"{prefix}{at}.arguments", part.arguments))
        elif isinstance(part, ToolResultPart):
            texts += _texts(part.content, f"{prefix}{at}.content.")
        elif isinstance(part, MediaPart) and part.url is not None:
            texts.append((f"{prefix}{at}.url", part.url))
    return texts


def _extras(parts: Sequence[Part], prefix: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The ``extra`` of each of ``parts`` that has one (but the verbatim item its text is the
    JSON of), with its field path."""
    extras: list[tuple[str, Mapping[str, Any]]] = []
    for at, part in enumerate(parts):
        if part.extra:
            mirrored = _mirrored(part)
            extras.append(
                (f"{prefix}{at}.extra", {k: v for k, v in part.extra.items() if k != mirrored})
            )
        if isinstance(part, ToolResultPart):
            extras += _extras(part.content, f"{prefix}{at}.content.")
    return extras


def scan_parts(parts: Sequence[Part]) -> list[Finding]:
    """The secrets in the texts of ``parts`` (text, reasoning, tool-call arguments, the text
    of tool results, media URLs and the strings of each part's ``extra``; media data is never
    read), each with its ``field``."""
    found: list[Finding] = []
    for field, text in _texts(parts, "parts."):
        found += findings_in(text, field)
    for field, extra in _extras(parts, "parts."):
        found += scan_value(extra, field)
    return sorted(found, key=lambda f: int(f.field.split(".")[1]))  # by part, stably


def scan_message(message: Message) -> list[Finding]:
    """The secrets in ``message``: its parts (see :func:`scan_parts`) and the strings of its
    ``extra`` (field ``extra.<key>``)."""
    return scan_parts(message.parts) + scan_value(dict(message.extra), "extra")


def _masked_at(
    text: str, field: str, by_field: dict[str, list[Finding]], out: list[Finding]
) -> str:
    if field not in by_field:
        return text
    masked, moved = _masked(text, by_field[field])
    out += moved
    return masked


def _masked_extra(
    extra: Mapping[str, Any], field: str, by_field: dict[str, list[Finding]], out: list[Finding]
) -> Mapping[str, Any]:
    """``extra`` with its strings masked when ``by_field`` found secrets in it (rescanned: a
    key holding a dot could make two strings share a path)."""
    if not any(f.startswith(field + ".") for f in by_field):
        return extra
    masked, moved = mask_value(extra, field)
    out += moved
    return dict(masked)


def _mask_parts(
    parts: Sequence[Part], prefix: str, by_field: dict[str, list[Finding]], out: list[Finding]
) -> tuple[Part, ...]:
    masked: list[Part] = []
    for at, part in enumerate(parts):
        mirrored = _mirrored(part)
        if isinstance(part, TextPart | ReasoningPart):
            part = dataclasses.replace(
                part, text=_masked_at(part.text, f"{prefix}{at}.text", by_field, out)
            )
        elif isinstance(part, ToolCallPart):
            field = f"{prefix}{at}.arguments"
            part = dataclasses.replace(
                part, arguments=_masked_at(part.arguments, field, by_field, out)
            )
        elif isinstance(part, ToolResultPart):
            content = _mask_parts(part.content, f"{prefix}{at}.content.", by_field, out)
            part = dataclasses.replace(part, content=content)
        elif isinstance(part, MediaPart) and part.url is not None:
            part = dataclasses.replace(
                part, url=_masked_at(part.url, f"{prefix}{at}.url", by_field, out)
            )
        if part.extra:
            extra = dict(_masked_extra(part.extra, f"{prefix}{at}.extra", by_field, out))
            if mirrored is not None and isinstance(part, TextPart):
                # The verbatim item is its text's JSON: it is read back from the masked text, so
                # it stays what the text says (and renders verbatim, masked).
                try:
                    extra[mirrored] = json.loads(part.text)
                except ValueError:
                    del extra[mirrored]  # the text alone stands for it
            part = dataclasses.replace(part, extra=extra)
        masked.append(part)
    return tuple(masked)


def mask_parts(
    parts: Sequence[Part], findings: Sequence[Finding]
) -> tuple[tuple[Part, ...], list[Finding]]:
    """``parts`` with every finding masked, and the findings at their masks' offsets."""
    by_field: dict[str, list[Finding]] = {}
    for finding in findings:
        by_field.setdefault(finding.field, []).append(finding)
    out: list[Finding] = []
    return _mask_parts(parts, "parts.", by_field, out), out


def mask_message(message: Message, findings: Sequence[Finding]) -> tuple[Message, list[Finding]]:
    """``message`` with each of its ``findings`` replaced by ``[SECRET:<kind>]``, and the
    findings moved to the masks' offsets in the masked texts.

    A JSON tool-call argument stays JSON: the mask holds no quote or backslash. A verbatim item
    whose text is masked is masked alike, so that it still renders as sent, but for the masks.
    """
    if not findings:
        return message, []
    by_field: dict[str, list[Finding]] = {}
    for finding in findings:
        by_field.setdefault(finding.field, []).append(finding)
    out: list[Finding] = []
    parts = _mask_parts(message.parts, "parts.", by_field, out)
    extra = _masked_extra(message.extra, "extra", by_field, out)
    return dataclasses.replace(message, parts=parts, extra=extra), out
