"""What fills a context, item by item: each tool definition (grouped by MCP server), each tool's
calls and outputs, the files tools read or wrote, the instruction blocks agents inject
(CLAUDE.md and AGENTS.md contents, ``<system-reminder>``, skills and agent lists), images,
summaries, and each message's text, with exact tokens.

:func:`context_items` attributes a whole context; it is the sum of :func:`system_items`,
:func:`tool_items` and :func:`message_items` per message (a message's tool results need the
calls made before it: :func:`call_targets`), so items can be computed once per message and added
up. The items of each region add up exactly to that region of
:func:`compaction.regions.context_regions` counted with the same counter, an ``unattributed``
item per region holding the framing (message wrappers, the request's priming).
:func:`item_labels` says which of a project overview's top lists (:data:`TOP_LISTS`) an item
counts in, by the rules of :data:`LABEL_RULES`.

Example:
    >>> from compaction.messages.model import (
    ...     Context, Message, TextPart, ToolCallPart, ToolResultPart
    ... )
    >>> from compaction.tokens import TokenCounter, get_tokenizer
    >>> counter = TokenCounter(get_tokenizer("cl100k_base"))
    >>> call = ToolCallPart("c1", "Read", '{"file_path": "/src/app.py"}')
    >>> result = ToolResultPart("c1", (TextPart("import os\\nprint(os.getcwd())"),))
    >>> messages = (Message("assistant", (call,)), Message("user", (result,)))
    >>> attribution = context_items(Context("anthropic-messages", messages), counter)
    >>> [(t.kind, t.name, t.tokens) for t in attribution.by_region()["tool_results"]]
    [('file', '/src/app.py', 7)]
"""

from __future__ import annotations

from compaction.attribution._blocks import MAX_BLOCKS, Block, instruction_blocks
from compaction.attribution._files import (
    call_files,
    call_patch,
    output_file,
    patch_sections,
    tool_server,
)
from compaction.attribution._items import (
    MAX_NAME_CHARS,
    CallTarget,
    PrefixMemo,
    call_targets,
    context_items,
    message_items,
    system_items,
    tool_items,
)
from compaction.attribution._model import (
    KINDS,
    Attribution,
    Item,
    ItemKey,
    ItemKind,
    ItemTotal,
    Where,
    sum_items,
)
from compaction.attribution.labels import LABEL_RULES, TOP_LISTS, LabelRule, item_labels

__all__ = [
    "KINDS",
    "LABEL_RULES",
    "MAX_BLOCKS",
    "MAX_NAME_CHARS",
    "TOP_LISTS",
    "Attribution",
    "Block",
    "CallTarget",
    "Item",
    "ItemKey",
    "ItemKind",
    "ItemTotal",
    "LabelRule",
    "PrefixMemo",
    "Where",
    "call_files",
    "call_patch",
    "call_targets",
    "context_items",
    "instruction_blocks",
    "item_labels",
    "message_items",
    "output_file",
    "patch_sections",
    "sum_items",
    "system_items",
    "tool_items",
    "tool_server",
]
