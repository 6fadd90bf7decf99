"""Every estimator by name (:data:`ESTIMATORS`), each a factory that, given the session's
tokenizer, returns a per-message function, so a view can compare them on the same turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypeAlias

from compaction.messages.model import Message
from compaction.tokens._counter import TokenCounter
from compaction.tokens._encodings import CL100K_BASE, Tokenizer, get_tokenizer
from compaction.tokens.estimators._baseagent import baseagent_message_tokens
from compaction.tokens.estimators._codex import codex_message_tokens
from compaction.tokens.estimators._copaw import copaw_message_tokens
from compaction.tokens.estimators._llm4s import llm4s_message_tokens
from compaction.tokens.estimators._nanobot import nanobot_message_tokens
from compaction.tokens.estimators._picoclaw import picoclaw_message_tokens

MessageEstimator: TypeAlias = Callable[[Message], int]
EstimatorFactory: TypeAlias = Callable[[Tokenizer], MessageEstimator]


def _tiktoken(tokenizer: Tokenizer) -> MessageEstimator:
    counter = TokenCounter(tokenizer)
    return lambda message: counter.count_message(message).total


def _llm4s(tokenizer: Tokenizer) -> MessageEstimator:
    return lambda message: llm4s_message_tokens(message, tokenizer.count)


def _nanobot(tokenizer: Tokenizer) -> MessageEstimator:
    # nanobot always counts with cl100k_base, whatever the model.
    cl100k = get_tokenizer(CL100K_BASE)
    return lambda message: nanobot_message_tokens(message, cl100k)


def _ignoring_tokenizer(estimate: MessageEstimator) -> EstimatorFactory:
    return lambda tokenizer: estimate


#: Each estimator by name, as a factory: given the session's tokenizer, a per-message function.
#: ``ESTIMATORS["picoclaw"](tokenizer)(message)``. Only "tiktoken" and "llm4s" use the tokenizer;
#: nanobot always uses cl100k_base.
ESTIMATORS: Mapping[str, EstimatorFactory] = MappingProxyType(
    {
        "tiktoken": _tiktoken,
        "baseagent": _ignoring_tokenizer(baseagent_message_tokens),
        "codex": _ignoring_tokenizer(codex_message_tokens),
        "picoclaw": _ignoring_tokenizer(picoclaw_message_tokens),
        "llm4s": _llm4s,
        "nanobot": _nanobot,
        "copaw": _ignoring_tokenizer(copaw_message_tokens),
    }
)
