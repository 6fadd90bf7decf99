"""The ``llm4s-pipeline`` strategy: LLM4S's ``ContextManager`` pipeline run on a draft.

:class:`Llm4sPipeline` runs the four steps on the draft's history (the leading system and
developer messages stay as they are), then records each change as an edit: externalized and
compacted tool outputs kept as artifacts, digested and trimmed messages dropped, digests inserted,
and a warning for each LLM4S quirk that fired.
"""

from __future__ import annotations

from typing import Any

from compaction.errors import StrategyError
from compaction.messages.model import ToolResultPart
from compaction.strategies.base import Draft, EditKind, Param, Strategy
from compaction.strategies.llm4s._context_manager import _manage, _with_text
from compaction.strategies.llm4s._history_compressor import (
    DEFAULT_MAX_BLOCKS,
    DEFAULT_SUMMARY_TARGET,
)
from compaction.strategies.llm4s._pipeline_state import _Config, _Run
from compaction.strategies.llm4s._token_counter import _Item, _items_tokens, _MessageTokens
from compaction.strategies.llm4s._token_window import DEFAULT_HEADROOM
from compaction.strategies.llm4s._tool_output_compressor import EXTERNALIZE_BYTES, INLINE_BYTES
from compaction.summarizers import Summarizer, SummarizerError


class Llm4sPipeline(Strategy):
    """``llm4s-pipeline``: LLM4S's four-step ``ContextManager`` pipeline (§3)."""

    id = "llm4s-pipeline"
    description = (
        "LLM4S's pipeline: externalize tool outputs over 8 KB behind [EXTERNALIZED: content_<sha>"
        " | TYPE | summary], compact 2-8 KB ones inline by type, replace all but the last 5"
        " semantic blocks with [HISTORY_SUMMARY] regex digests when over budget, optionally"
        " squeeze the digests with an LLM, then keep the newest messages within budget minus 8%."
    )
    source = "LLM4S"
    params = (
        Param(
            "budget",
            "int",
            None,
            min=1,
            max=10_000_000,
            help="token budget of the conversation (LLM4S tokens); default: context window"
            " minus output reserve",
        ),
        Param(
            "context_window",
            "int",
            200_000,
            min=1000,
            max=10_000_000,
            help="for the default budget",
        ),
        Param(
            "output_reserve",
            "int",
            None,
            min=0,
            max=1_000_000,
            help="for the default budget; default the context's max output tokens, else 0",
        ),
        Param(
            "headroom",
            "float",
            DEFAULT_HEADROOM,
            min=0.0,
            max=1.0,
            help="FinalTokenTrim keeps within budget × (1 − headroom); 0 ≤ headroom < 1",
        ),
        Param(
            "max_semantic_blocks",
            "int",
            DEFAULT_MAX_BLOCKS,
            min=0,
            max=10_000,
            help="recent semantic blocks kept verbatim by HistoryCompression (≤ 0: none)",
        ),
        Param(
            "summary_token_target",
            "int",
            DEFAULT_SUMMARY_TARGET,
            min=1,
            max=1_000_000,
            help="digest tokens above which digests are consolidated (and squeezed)",
        ),
        Param(
            "enable_deterministic_compression", "bool", True, help="run ToolDeterministicCompaction"
        ),
        Param(
            "enable_llm_compression",
            "bool",
            True,
            help="run LLMHistorySqueeze when a summarizer is configured",
        ),
        Param(
            "externalize_bytes",
            "int",
            EXTERNALIZE_BYTES,
            min=1,
            max=100_000_000,
            help="tool outputs above this many UTF-8 bytes are externalized",
        ),
        Param(
            "inline_bytes",
            "int",
            INLINE_BYTES,
            min=0,
            max=100_000_000,
            help="tool outputs above this many bytes are compressed inline by type",
        ),
        Param(
            "keep_tool_pairs",
            "bool",
            False,
            help="deviation: never let the block split or the trim orphan a tool result",
        ),
        Param(
            "no_growth",
            "bool",
            False,
            help="deviation: skip an inline compression that makes the output longer",
        ),
        Param(
            "digest_in_place",
            "bool",
            False,
            help="deviation: keep a squeezed digest where it was instead of moving it to the end",
        ),
    )

    def check_together(self, params: dict[str, Any]) -> None:
        if params["headroom"] >= 1.0:
            raise StrategyError(
                "params.headroom", "Headroom percent must be between 0.0 and 1.0 (below 1)"
            )

    def run(self, draft: Draft, params: dict[str, Any], summarizer: Summarizer | None) -> None:
        budget = params["budget"]
        if budget is None:
            reserve: int = params["output_reserve"]
            if reserve is None:
                reserve = draft.context.max_output_tokens or 0
            budget = max(params["context_window"] - reserve, 1)
        config = _Config(
            budget=budget,
            headroom=params["headroom"],
            max_blocks=params["max_semantic_blocks"],
            summary_target=params["summary_token_target"],
            deterministic=params["enable_deterministic_compression"],
            llm=params["enable_llm_compression"],
            externalize_bytes=params["externalize_bytes"],
            inline_bytes=params["inline_bytes"],
            keep_tool_pairs=params["keep_tool_pairs"],
            no_growth=params["no_growth"],
            digest_in_place=params["digest_in_place"],
        )
        lead = 0
        while lead < len(draft.messages) and draft.messages[lead].role in ("system", "developer"):
            lead += 1
        items: list[_Item] = [(draft.messages[p], p) for p in range(lead, len(draft.messages))]
        if not items:
            draft.warn(
                "llm4s-pipeline: Cannot trim empty conversation (LLM4S fails the whole pipeline);"
                " the context is left unchanged"
            )
            return
        tokens = _MessageTokens(draft.text_tokens)
        try:
            run = _manage(items, tokens, config, summarizer)
        except SummarizerError as error:
            draft.warn(
                f"llm4s-pipeline: the LLM squeeze failed ({error}); LLM4S fails the whole"
                " pipeline, so the context is left unchanged"
            )
            return
        self._apply(draft, run, lead, tokens, config)

    def _apply(
        self, draft: Draft, run: _Run, lead: int, tokens: _MessageTokens, config: _Config
    ) -> None:
        for (position, part_index), (old, new, action) in sorted(run.outputs.items()):
            message = draft.messages[position]
            part = message.parts[part_index]
            assert isinstance(part, ToolResultPart)
            if action == "externalize":
                artifact = draft.keep("tool_result", old, new[:-1].split(" | ", 2)[2])
                kind: EditKind = "externalize"
                detail = (
                    f"ToolDeterministicCompaction: externalized tool output {part.tool_call_id}"
                )
            else:
                artifact = draft.keep("tool_result", old, f"tool output {part.tool_call_id}")
                kind = "compact-inline"
                detail = f"ToolDeterministicCompaction: compacted tool output {part.tool_call_id}"
            draft.replace_message(
                position,
                _with_text(message, part_index, new),
                kind,
                detail,
                part_index=part_index,
                artifact_id=artifact.id,
            )
        final = run.items
        surviving = {p for _, p in final if p is not None}
        digested = [p for p in sorted(set(run.digested)) if p not in surviving]
        trimmed = [p for p in sorted(set(run.trimmed)) if p not in surviving and p not in digested]
        # Positions never move before the drops below: step 1 only replaced messages in place.
        if digested:
            draft.drop(digested, "summarize-range", "HistoryCompression: digested")
        if trimmed:
            remaining = [p - sum(1 for d in digested if d < p) for p in trimmed]
            draft.drop(remaining, "drop", "FinalTokenTrim: dropped")
        # Now draft.messages[lead:] are the surviving originals in order; insert new ones.
        for k, (message, origin) in enumerate(final):
            if origin is None:
                draft.insert(lead + k, message, "[HISTORY_SUMMARY] digest")
        self._warn(draft, run, tokens, config)

    def _warn(self, draft: Draft, run: _Run, tokens: _MessageTokens, config: _Config) -> None:
        if "grew" in run.notes:
            draft.warn(
                "llm4s-pipeline: text compression made a tool output longer (LLM4S's quirk with"
                " fewer than 70 words); set no_growth to skip it"
                if not config.no_growth
                else "llm4s-pipeline: skipped an inline compression that would grow an output"
            )
        if "split-orphans" in run.notes:
            draft.warn(
                "llm4s-pipeline: the semantic-block split digested a tool call but kept its result"
                " (orphaned tool result); set keep_tool_pairs to avoid it"
            )
        if "trim-orphans" in run.notes:
            draft.warn(
                "llm4s-pipeline: FinalTokenTrim kept a tool result without its call (orphaned"
                " tool result); set keep_tool_pairs to avoid it"
            )
        if "digest-moved" in run.notes:
            draft.warn(
                "llm4s-pipeline: the squeezed digest moved to the end of the conversation"
                " (LLM4S's order quirk); set digest_in_place to keep it first"
            )
        final = _items_tokens(run.items, tokens)
        if final > config.budget:
            draft.warn(
                f"llm4s-pipeline: {final} tokens remain above the budget of {config.budget}"
                " (LLM4S does not reserve its +10 conversation overhead when trimming)"
            )
