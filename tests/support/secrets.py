"""Real-shaped fake credentials for the secret-scanning tests: each has the exact shape of a
provider's key (prefix, alphabet, length, checksum-like suffix) and is valid nowhere.

They are assembled from pieces so that no scanner of this repository flags the source itself.
"""

from __future__ import annotations

import base64
import json

_ALNUM = "Ab3dE5gH7jK9mN2pQ4sT6vW8yZ"


def _filler(length: int, alphabet: str = _ALNUM) -> str:
    return (alphabet * (length // len(alphabet) + 1))[:length]


AWS_ACCESS_KEY = "AKIA" + "QYLPMN5HFIQR7BX2"
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB_PAT = "ghp_" + _filler(36)
OPENAI_KEY = "sk-proj-" + _filler(58, _ALNUM + "_-") + "T3Blbk" + "FJ" + _filler(58)
OPENAI_LEGACY_KEY = "sk-" + _filler(20) + "T3Blbk" + "FJ" + _filler(20)
ANTHROPIC_KEY = "sk-ant-" + "api03-" + _filler(93, _ALNUM + "_-") + "AA"
SLACK_BOT_TOKEN = "xox" + "b-1234567890123-1234567890123-" + _filler(24)
PRIVATE_KEY = (
    "-----BEGIN RSA "
    + "PRIVATE KEY-----\n"
    + "\n".join(_filler(64) for _ in range(4))
    + "\n-----END RSA "
    + "PRIVATE KEY-----"
)


def _b64(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


JWT = (
    _b64({"alg": "HS256", "typ": "JWT"})
    + "."
    + _b64({"sub": "1234567890", "name": "Fake Person", "iat": 1516239022})
    + "."
    + _filler(43, _ALNUM + "_-")
)
BEARER_TOKEN = "f4k3t0k3n" + _filler(24)
AUTHORIZATION_HEADER = "Authorization: Bearer " + BEARER_TOKEN

#: kind -> a fake credential of that kind.
FAKES = {
    "aws-access-token": AWS_ACCESS_KEY,
    "github-pat": GITHUB_PAT,
    "openai-api-key": OPENAI_KEY,
    "anthropic-api-key": ANTHROPIC_KEY,
    "slack-bot-token": SLACK_BOT_TOKEN,
    "private-key": PRIVATE_KEY,
    "jwt": JWT,
}
