"""LLM4S's ``ContextManager.manageContext`` (``docs/seed-strategies.md`` §3.2): the four steps in
order, ToolDeterministicCompaction, HistoryCompression, LLMHistorySqueeze and FinalTokenTrim.

:func:`manage_context` runs them on a conversation; the strategy runs the same steps on the
draft's items, so it knows what each position became.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from compaction.messages.model import Message, Part, TextPart, ToolResultPart
from compaction.strategies.llm4s._history_compressor import (
    DEFAULT_MAX_BLOCKS,
    DEFAULT_SUMMARY_TARGET,
    HISTORY_SUMMARY,
    _content,
    _digest_items,
)
from compaction.strategies.llm4s._llm_compressor import _step3
from compaction.strategies.llm4s._pipeline_state import (
    STEP_NAMES,
    ManagedConversation,
    PipelineStep,
    _Config,
    _Run,
)
from compaction.strategies.llm4s._token_counter import Count, _Item, _items_tokens, _MessageTokens
from compaction.strategies.llm4s._token_window import DEFAULT_HEADROOM, _trim_items, _validate
from compaction.strategies.llm4s._tool_output_compressor import compress_tool_output
from compaction.summarizers import Summarizer
from compaction.turns import find_legal_start


def _with_text(message: Message, part_index: int, text: str) -> Message:
    part = message.parts[part_index]
    assert isinstance(part, ToolResultPart)
    others = [p for p in part.content if not isinstance(p, TextPart)]
    first = next((p for p in part.content if isinstance(p, TextPart)), None)
    new: Part = TextPart(text, first.extra) if first is not None else TextPart(text)
    parts = list(message.parts)
    parts[part_index] = replace(part, content=(new, *others))
    return replace(message, parts=tuple(parts))


def _step1(run: _Run, config: _Config, tokens: _MessageTokens) -> None:
    before = _items_tokens(run.items, tokens)
    if not config.deterministic:
        run.steps.append(PipelineStep(STEP_NAMES[0], before, before, False))
        return
    changed = False
    for k, (message, position) in enumerate(run.items):
        for j, part in enumerate(message.parts):
            if not isinstance(part, ToolResultPart):
                continue
            old = part.text
            new, action = compress_tool_output(
                old,
                part.tool_call_id,
                externalize_bytes=config.externalize_bytes,
                inline_bytes=config.inline_bytes,
            )
            if action is None or new == old:
                continue
            if action == "inline" and len(new) > len(old):
                run.notes.append("grew")
                if config.no_growth:
                    continue
            message = _with_text(message, j, new)
            changed = True
            if position is not None:
                run.outputs[(position, j)] = (old, new, action)
        run.items[k] = (message, position)
    after = _items_tokens(run.items, tokens)
    run.steps.append(PipelineStep(STEP_NAMES[0], before, after, changed))


def _step2(run: _Run, config: _Config, tokens: _MessageTokens) -> None:
    before = _items_tokens(run.items, tokens)
    if before <= config.budget:
        run.steps.append(PipelineStep(STEP_NAMES[1], before, before, False))
        return
    out, gone, orphaned = _digest_items(
        run.items, tokens, config.summary_target, config.max_blocks, config.keep_tool_pairs
    )
    if orphaned:
        run.notes.append("split-orphans")
    applied = [m for m, _ in out] != [m for m, _ in run.items]
    run.items = out
    run.digested += gone
    run.steps.append(PipelineStep(STEP_NAMES[1], before, _items_tokens(out, tokens), applied))


def _step4(run: _Run, config: _Config, tokens: _MessageTokens) -> None:
    before = _items_tokens(run.items, tokens)
    out, trimmed = _trim_items(run.items, tokens, config.budget, config.headroom)
    pinned = 1 if trimmed and HISTORY_SUMMARY in _content(run.items[0][0]) else 0
    if trimmed and len(out) > pinned:
        tail = [m for m, _ in out[pinned:]]
        legal = find_legal_start(tail)
        if legal:
            if config.keep_tool_pairs:
                out = [*out[:pinned], *out[pinned + legal :]]
            else:
                run.notes.append("trim-orphans")
    kept = {id(item) for item in out}
    run.trimmed += [p for item in run.items if id(item) not in kept and (p := item[1]) is not None]
    run.items = out
    run.steps.append(PipelineStep("FinalTokenTrim", before, _items_tokens(out, tokens), trimmed))


def _manage(
    items: list[_Item], tokens: _MessageTokens, config: _Config, summarizer: Summarizer | None
) -> _Run:
    _validate(1, config.budget, config.headroom)
    run = _Run(list(items), [], {}, [], [], [])
    _step1(run, config, tokens)
    _step2(run, config, tokens)
    _step3(run, config, tokens, summarizer)
    _step4(run, config, tokens)
    return run


def manage_context(
    messages: Sequence[Message],
    count: Count,
    budget: int,
    *,
    headroom: float = DEFAULT_HEADROOM,
    max_semantic_blocks: int = DEFAULT_MAX_BLOCKS,
    summary_token_target: int = DEFAULT_SUMMARY_TARGET,
    enable_deterministic_compression: bool = True,
    enable_llm_compression: bool = True,
    summarizer: Summarizer | None = None,
) -> ManagedConversation:
    """LLM4S's ``ContextManager.manageContext`` with ``ContextConfig.default`` unless told.

    Raises :class:`StrategyError` where LLM4S returns ``Left`` (bad budget or headroom, empty
    conversation) and :class:`~compaction.summarizers.SummarizerError` when the squeeze fails.

    Example:
        >>> from compaction.messages.model import Message, TextPart
        >>> done = manage_context([Message("user", (TextPart("hi"),))], len, 1000)
        >>> [s.applied for s in done.steps]
        [False, False, False, False]
    """
    config = _Config(
        budget,
        headroom,
        max_semantic_blocks,
        summary_token_target,
        enable_deterministic_compression,
        enable_llm_compression,
    )
    tokens = _MessageTokens(count)
    run = _manage([(m, i) for i, m in enumerate(messages)], tokens, config, summarizer)
    final = tuple(m for m, _ in run.items)
    return ManagedConversation(
        final,
        tokens.conversation(messages),
        tokens.conversation(final),
        tuple(run.steps),
    )
