"""Secrets in messages: credentials found by kind and place, never by value, and masked.

The rules are ported from gitleaks' default rule set (``config/gitleaks.toml``, MIT licence,
github.com/gitleaks/gitleaks): AWS access keys, GitHub, GitLab, Slack, Stripe, Google, Hugging
Face and npm tokens, OpenAI and Anthropic API keys, private key blocks and JWTs, with gitleaks' own
ids as kinds. Three rules are ctxweb's own, for what agents' contexts hold and gitleaks leaves to
its generic rule: ``authorization-header`` (the credential after ``Authorization: Bearer|Basic|
Token``, or after an ``x-api-key`` header), ``aws-secret-access-key`` (the 40 characters after an
``aws_secret_access_key`` name) and ``openai-project-key`` (``sk-proj-`` keys without gitleaks'
``T3BlbkFJ`` marker). Each rule runs only when one of its keywords is in the text, as gitleaks
does, so a text without any costs one lower-cased copy and a substring search per keyword.

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
import re
from collections.abc import Sequence
from dataclasses import dataclass

from compaction.messages import Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "RULES",
    "Finding",
    "Rule",
    "findings_in",
    "mask_message",
    "mask_parts",
    "mask_text",
    "scan_message",
    "scan_parts",
    "scan_text",
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


#: gitleaks' rules (kind = gitleaks id), then ctxweb's own three, in the order they are tried.
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
    return texts


def scan_parts(parts: Sequence[Part]) -> list[Finding]:
    """The secrets in the texts of ``parts`` (text, reasoning, tool-call arguments and the text
    of tool results; media is never read), each with its ``field``."""
    found: list[Finding] = []
    for field, text in _texts(parts, "parts."):
        found += findings_in(text, field)
    return found


def scan_message(message: Message) -> list[Finding]:
    """The secrets in ``message`` (see :func:`scan_parts`)."""
    return scan_parts(message.parts)


def _mask_parts(
    parts: Sequence[Part], prefix: str, by_field: dict[str, list[Finding]], out: list[Finding]
) -> tuple[Part, ...]:
    masked: list[Part] = []
    for at, part in enumerate(parts):
        if isinstance(part, TextPart | ReasoningPart):
            field = f"{prefix}{at}.text"
            if field in by_field:
                text, moved = _masked(part.text, by_field[field])
                out += moved
                part = dataclasses.replace(part, text=text)
        elif isinstance(part, ToolCallPart):
            field = f"{prefix}{at}.arguments"
            if field in by_field:
                text, moved = _masked(part.arguments, by_field[field])
                out += moved
                part = dataclasses.replace(part, arguments=text)
        elif isinstance(part, ToolResultPart):
            content = _mask_parts(part.content, f"{prefix}{at}.content.", by_field, out)
            part = dataclasses.replace(part, content=content)
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

    A JSON tool-call argument stays JSON: the mask holds no quote or backslash.
    """
    if not findings:
        return message, []
    parts, moved = mask_parts(message.parts, findings)
    return dataclasses.replace(message, parts=parts), moved
