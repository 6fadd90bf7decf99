"""LLM4S's ``LLMCompressor.squeezeDigest`` (``docs/seed-strategies.md`` §3.6), the pipeline's
``LLMHistorySqueeze`` step: each ``[HISTORY_SUMMARY]`` digest rewritten by a summarizer with
LLM4S's own prompt (:data:`DIGEST_PROMPT`).
"""

from __future__ import annotations

from compaction.messages.model import Message, Role, TextPart
from compaction.strategies.llm4s._history_compressor import HISTORY_SUMMARY, _content
from compaction.strategies.llm4s._pipeline_state import STEP_NAMES, PipelineStep, _Config, _Run
from compaction.strategies.llm4s._token_counter import _Item, _items_tokens, _MessageTokens
from compaction.summarizers import Summarizer

#: LLMCompressor's ``DigestCompressionPrompt``, byte for byte (two spaces end its third line).
DIGEST_PROMPT = (
    "Compress this history digest while preserving key structured information:\n"
    "- Keep all IDs, URLs, status codes, error messages\n"
    "- Preserve decision points and outcomes  \n"
    "- Maintain tool usage patterns\n"
    "- Compress descriptive text only\n"
    "- Target 50% size reduction"
)


def _step3(
    run: _Run, config: _Config, tokens: _MessageTokens, summarizer: Summarizer | None
) -> None:
    before = _items_tokens(run.items, tokens)
    skip = PipelineStep(STEP_NAMES[2], before, before, False)
    if before <= config.budget or not config.llm or summarizer is None:
        run.steps.append(skip)
        return
    digests = [k for k, (m, _) in enumerate(run.items) if HISTORY_SUMMARY in _content(m)]
    if not digests:
        run.steps.append(skip)
        return
    if sum(tokens(run.items[k][0]) for k in digests) <= config.summary_target:
        run.steps.append(skip)
        return
    squeezed: dict[int, _Item] = {}
    for k in digests:
        message, position = run.items[k]
        content = _content(message)
        header, sep, body = content.partition("\n")
        if not (sep and HISTORY_SUMMARY in header):
            body = content
        reply = summarizer.summarize(
            [Message("user", (TextPart(body),))], previous=None, prompt=DIGEST_PROMPT
        )
        role: Role = "system" if message.role == "system" else "user"
        squeezed[k] = (Message(role, (TextPart(f"{HISTORY_SUMMARY}\n{reply}"),)), None)
        if position is not None:
            run.digested.append(position)
    if config.digest_in_place:
        out = [squeezed.get(k, item) for k, item in enumerate(run.items)]
    else:
        out = [item for k, item in enumerate(run.items) if k not in squeezed]
        out += [squeezed[k] for k in digests]
        if len(out) > len(digests):
            run.notes.append("digest-moved")
    applied = [m for m, _ in out] != [m for m, _ in run.items]
    run.items = out
    run.steps.append(PipelineStep(STEP_NAMES[2], before, _items_tokens(out, tokens), applied))
