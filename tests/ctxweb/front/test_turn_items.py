"""The turn inspector shows an item kept verbatim as what it is: Codex's ``additional_tools`` as
its type and the tools it defines, an unknown role by name; its JSON behind a fold, escaped."""

from __future__ import annotations

from compaction.messages import parse
from ctxweb.contexts.services import turn_ingest
from tests.support.world import World

TOOLS_ITEM = {
    "type": "additional_tools",
    "tools": [
        {
            "type": "namespace",
            "name": "github",
            "tools": [
                {"type": "function", "name": "search", "description": "Find <b>code</b>."},
            ],
        },
        {"type": "custom", "name": "exec", "description": "Run a command."},
    ],
}


def test_the_inspector_shows_an_additional_tools_item_as_its_tools(world: World) -> None:
    request = {
        "model": "gpt-5",
        "input": [
            TOOLS_ITEM,
            {"type": "message", "role": "critic", "content": "<script>x</script>"},
            {"type": "message", "role": "user", "content": "Fix it."},
        ],
    }
    context = parse("openai-responses", request)
    turn_ingest(project=world.project, external_id="codex", context=context, model="gpt-5")
    page = world.login(world.owner).get("/sessions/codex/turns/0/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "additional_tools" in html
    assert "github.search" in html
    assert "exec" in html
    assert "Find &lt;b&gt;code&lt;/b&gt;." in html
    assert "role critic" in html
    assert "<script>x</script>" not in html
    assert "kept verbatim" in html
