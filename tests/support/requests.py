"""Hypothesis strategies for provider requests: every shape each format's parser accepts, with
arbitrary JSON values where the format allows them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

text = st.text(max_size=12)
scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
value = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
obj = st.dictionaries(text, value, max_size=3)
urls = (
    st.sampled_from(
        [
            "https://x.test/a.png",
            "data:image/png;base64,iVBORw0",
            "data:;base64,",
            "data:text/plain,hi",
        ]
    )
    | text
)
cache = {"cache_control": st.just({"type": "ephemeral"}) | value}


def fixed(required: dict[str, Any], **optional: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {k: v if isinstance(v, st.SearchStrategy) else st.just(v) for k, v in required.items()},
        optional={
            k: v if isinstance(v, st.SearchStrategy) else st.just(v) for k, v in optional.items()
        },
    )


# -- OpenAI Chat -------------------------------------------------------------------------------

chat_part = st.one_of(
    fixed({"type": "text", "text": text}, **cache),
    fixed({"type": "refusal", "refusal": text}),
    fixed(
        {
            "type": "image_url",
            "image_url": urls | fixed({"url": urls}, detail=st.sampled_from(["low", "high"])),
        }
    ),
    fixed({"type": "input_audio", "input_audio": fixed({"data": text, "format": text})}),
    fixed(
        {"type": "file", "file": fixed({}, file_data=urls | st.none(), file_id=text, filename=text)}
    ),
    fixed({"type": "weird", "payload": value}),
)
chat_content = st.none() | text | st.lists(chat_part, max_size=3)
tool_call = fixed(
    {"id": text, "function": fixed({"name": text, "arguments": text}, strict=st.booleans())},
    type="function",
) | fixed({"id": text, "type": "custom", "custom": fixed({"name": text, "input": text})})
chat_message = st.one_of(
    fixed(
        {"role": st.sampled_from(["system", "developer", "user"]), "content": chat_content},
        name=text | st.none(),
    ),
    fixed(
        {"role": "assistant"},
        content=chat_content,
        tool_calls=st.none() | st.lists(tool_call, max_size=2),
        reasoning_content=text | st.none(),
        refusal=text | st.none(),
        function_call=fixed({"name": text, "arguments": text}),
        audio=fixed({"id": text}),
        name=text,
    ),
    fixed(
        {"role": "tool", "tool_call_id": text},
        content=text | st.none() | st.lists(fixed({"type": "text", "text": text}), max_size=2),
        name=text,
    ),
    fixed({"role": "function", "name": text, "content": text | st.none()}),
)
function = fixed(
    {"name": text},
    description=text | st.none(),
    parameters=obj | st.none(),
    strict=st.booleans(),
)
chat_request = fixed(
    {"model": text, "messages": st.lists(chat_message, max_size=5)},
    tools=st.none()
    | st.lists(
        fixed({"type": "function", "function": function})
        | fixed({"type": "custom", "custom": obj}),
        max_size=2,
    ),
    functions=st.lists(function, max_size=2),
    max_tokens=st.integers(0, 10**6) | st.none(),
    max_completion_tokens=st.integers(0, 10**6) | st.none(),
    temperature=st.floats(0, 2),
    stream=st.booleans(),
    metadata=obj,
)

# -- Anthropic Messages --------------------------------------------------------------------------

source = st.one_of(
    fixed({"type": "base64", "media_type": text, "data": text}),
    fixed({"type": "url", "url": text}),
    fixed({"type": "file", "file_id": text}),
    fixed({"type": "text", "media_type": "text/plain", "data": text}),
    fixed({}, data=text, media_type=st.none() | text),
)
text_block = fixed({"type": "text", "text": text}, citations=st.lists(obj, max_size=1), **cache)
media_block = fixed(
    {"type": st.sampled_from(["image", "document"]), "source": source},
    title=text,
    context=text | st.none(),
    **cache,
)
anthropic_block = st.one_of(
    text_block,
    media_block,
    fixed({"type": "tool_use", "id": text, "name": text, "input": obj}, **cache),
    fixed(
        {"type": "tool_result", "tool_use_id": text},
        content=st.none()
        | text
        | st.lists(
            text_block | media_block | fixed({"type": "search_result", "x": value}), max_size=2
        ),
        is_error=st.booleans() | st.none(),
        **cache,
    ),
    fixed({"type": "thinking", "thinking": text}, signature=text | st.none()),
    fixed({"type": "redacted_thinking", "data": text}),
    fixed({"type": "server_tool_use", "id": text, "name": text, "input": obj}),
)
anthropic_request = fixed(
    {
        "model": text,
        "max_tokens": st.integers(1, 10**6),
        "messages": st.lists(
            fixed(
                {
                    "role": st.sampled_from(["user", "assistant"]),
                    "content": text | st.lists(anthropic_block, max_size=3),
                }
            ),
            max_size=4,
        ),
    },
    system=st.none() | text | st.lists(text_block, max_size=2),
    tools=st.lists(
        fixed(
            {"name": text},
            description=text | st.none(),
            input_schema=obj | st.none(),
            type=text,
            **cache,
        ),
        max_size=2,
    ),
    metadata=obj,
    stream=st.booleans(),
    thinking=fixed({"type": "enabled", "budget_tokens": st.integers(0, 10**5)}),
)

# -- OpenAI Responses -----------------------------------------------------------------------------

responses_part = st.one_of(
    fixed(
        {"type": st.sampled_from(["input_text", "output_text"]), "text": text},
        annotations=st.lists(obj, max_size=1),
    ),
    fixed({"type": "refusal", "refusal": text}),
    fixed(
        {"type": "input_image"},
        image_url=urls | st.none(),
        detail=st.sampled_from(["auto", "low"]),
        file_id=text,
    ),
    fixed(
        {"type": "input_file"},
        file_data=urls | st.none(),
        file_url=text,
        file_id=text,
        filename=text,
    ),
    fixed({"type": "input_audio", "input_audio": obj}),
)
responses_item = st.one_of(
    fixed(
        {
            "role": st.sampled_from(["user", "assistant", "system", "developer"]),
            "content": text | st.lists(responses_part, max_size=3),
        },
        type="message",
        id=text,
        status=st.sampled_from(["completed", "in_progress"]),
    ),
    fixed(
        {"type": "function_call", "call_id": text, "name": text, "arguments": text},
        id=text,
        status=text,
    ),
    fixed(
        {
            "type": "function_call_output",
            "call_id": text,
            "output": text | st.lists(responses_part, max_size=2),
        },
        id=text,
        status=text,
    ),
    fixed(
        {"type": "reasoning"},
        id=text,
        summary=st.lists(fixed({"type": "summary_text", "text": text}), max_size=3),
        encrypted_content=text | st.none(),
        content=st.lists(fixed({"type": "reasoning_text", "text": text}), max_size=1),
    ),
    fixed(
        {
            "type": st.sampled_from(
                ["web_search_call", "item_reference", "custom_tool_call_output"]
            ),
            "id": text,
        },
        status=text,
    ),
)
responses_request = fixed(
    {"model": text},
    instructions=text | st.none(),
    input=text | st.none() | st.lists(responses_item, max_size=5),
    tools=st.lists(
        fixed(
            {"type": "function", "name": text},
            description=text | st.none(),
            parameters=obj | st.none(),
            strict=st.booleans(),
        )
        | fixed({"type": "web_search"}, search_context_size=text),
        max_size=2,
    ),
    max_output_tokens=st.integers(1, 10**6) | st.none(),
    previous_response_id=text,
    reasoning=fixed({"effort": st.sampled_from(["low", "high"])}, summary=text),
    store=st.booleans(),
)

REQUESTS = {
    "openai-chat": chat_request,
    "anthropic-messages": anthropic_request,
    "openai-responses": responses_request,
}
