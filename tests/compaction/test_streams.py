"""Providers' answers put back together from the bytes relayed: streamed (SSE) and not, for the
three request formats, as the recording proxy records them."""

from __future__ import annotations

import json

import pytest

from compaction.messages import parse
from compaction.streams import provider_answer, stream_finished


def sse(*events: tuple[str | None, object]) -> bytes:
    out = b""
    for name, data in events:
        if name:
            out += f"event: {name}\n".encode()
        out += f"data: {json.dumps(data)}\n\n".encode()
    return out + b"data: [DONE]\n\n"


def test_an_openai_stream_of_tool_call_pieces_becomes_one_call() -> None:
    head = {
        "index": 0,
        "id": "call_9",
        "type": "function",
        "function": {"name": "read", "arguments": ""},
    }
    body = sse(
        (None, {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
        (None, {"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]}),
        (
            None,
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]},
                    }
                ]
            },
        ),
        (
            None,
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{"index": 0, "function": {"arguments": 'th": "a"}'}}]
                        },
                    }
                ]
            },
        ),
        (None, {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 4}}),
    )
    answer = provider_answer("openai-chat", body, streamed=True)
    [message] = answer.messages
    assert message["tool_calls"][0]["id"] == "call_9"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"path": "a"}
    assert answer.usage == {"prompt_tokens": 30, "completion_tokens": 4}
    parse("openai-chat", {"model": "m", "messages": [{"role": "user", "content": "x"}, message]})


def test_an_anthropic_stream_keeps_text_tool_input_and_both_halves_of_usage() -> None:
    body = sse(
        (
            "message_start",
            {
                "type": "message_start",
                "message": {"usage": {"input_tokens": 12, "cache_read_input_tokens": 500}},
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Looking."},
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "tu", "name": "ls", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"dir": '},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '"src"}'},
            },
        ),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 9}}),
    )
    answer = provider_answer("anthropic-messages", body, streamed=True)
    [message] = answer.messages
    assert message["content"][0] == {"type": "text", "text": "Looking."}
    assert message["content"][1]["input"] == {"dir": "src"}
    assert answer.usage == {"input_tokens": 12, "cache_read_input_tokens": 500, "output_tokens": 9}


def test_a_responses_answer_streamed_or_not_is_its_output_items() -> None:
    response = {
        "id": "resp_1",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi"}],
            }
        ],
        "usage": {"input_tokens": 7, "output_tokens": 1},
    }
    streamed = sse(
        ("response.created", {"type": "response.created"}),
        ("response.completed", {"type": "response.completed", "response": response}),
    )
    for answer in (
        provider_answer("openai-responses", streamed, streamed=True),
        provider_answer("openai-responses", json.dumps(response).encode(), streamed=False),
    ):
        assert answer.messages == response["output"]
        assert answer.usage == {"input_tokens": 7, "output_tokens": 1}


def test_what_is_not_an_answer_gives_nothing_rather_than_an_error() -> None:
    assert provider_answer("openai-chat", b"<html>", streamed=False).messages == []
    assert provider_answer("anthropic-messages", b"data: {broken\n\n", streamed=True).messages == [
        {"role": "assistant", "content": []}
    ]


@pytest.mark.parametrize(
    ("format", "body", "finished"),
    [
        ("openai-chat", b'data: {"choices":[]}\n\ndata: [DONE]\n\n', True),
        ("openai-chat", b'data: {"choices":[]}\r\n\r\ndata: [DONE]\r\n\r\n', True),
        ("openai-chat", b'data: {"choices":[]}\n\ndata: [DONE]', True),  # its blank line not yet
        ("openai-chat", b'data: {"choices":[]}\n\n', False),
        ("openai-chat", b'data: {"choices":[{"delta":{"content":"[DONE]"}}]}\n\n', False),
        ("openai-chat", b"", False),
        (
            "anthropic-messages",
            b'event: message_delta\ndata: {"type":"message_delta"}\n\n'
            b'event: message_stop\ndata: {"type": "message_stop"}\n\n',
            True,
        ),
        ("anthropic-messages", b'event: message_delta\ndata: {"type":"message_delta"}\n\n', False),
        (
            "anthropic-messages",  # cut inside its last event's data
            b'event: message_stop\ndata: {"type": "message_st',
            False,
        ),
        (
            "openai-responses",
            b'event: response.completed\ndata: {"type":"response.completed","response":{}}\n\n',
            True,
        ),
        (
            "openai-responses",
            b'event: response.incomplete\ndata: {"type":"response.incomplete","response":{}}\n\n',
            True,
        ),
        ("openai-responses", b'event: x\ndata: {"type":"response.output_text.delta"}\n\n', False),
    ],
)
def test_a_stream_is_finished_once_it_holds_its_last_event(
    format: str, body: bytes, finished: bool
) -> None:
    assert stream_finished(format, body) is finished


def test_the_last_event_is_found_after_a_long_stream() -> None:
    events = b"".join(b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n' for _ in range(5000))
    assert stream_finished("openai-chat", events + b"data: [DONE]\n\n")
    assert not stream_finished("openai-chat", b"data: [DONE]\n\n" + events)
