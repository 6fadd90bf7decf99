"""The REST API against its own OpenAPI schema (``/api/schema/``), fuzzed by schemathesis.

Every operation gets generated requests (valid and invalid), sent with an operator key through
the WSGI application on the test database: no response may be a 5xx, and every response must
match the schema (status code documented, content type, body shape). Bounded: a fixed number
of examples per operation, derandomized, so a run is repeatable and takes well under a minute.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ctxweb.wsgi import application
from tests.support.builders import body, history
from tests.support.fuzz import same_connection
from tests.support.routes import API
from tests.support.world import World

#: Examples per operation; with about twenty operations this stays under a minute.
MAX_EXAMPLES = 20


def served_schema() -> dict[str, Any]:
    """The schema ``/api/schema/`` serves, made by the same generator without a request: a
    request through the WSGI handler at collection time would leave a closed connection
    behind for the tests (PostgreSQL)."""
    generator = SchemaGenerator()
    return generator.get_schema(request=None, public=True)  # type: ignore[no-any-return]


SCHEMA = schemathesis.openapi.from_dict(json.loads(json.dumps(served_schema(), default=str)))
SCHEMA.app = application
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


@pytest.fixture
def operator_key(world: World, settings: Any) -> str:
    """An operator key of a project holding session ``s1``; no rate limit for the fuzzer."""
    settings.CTXWEB_RATE_LIMIT = ""
    settings.CTXWEB_RATE_LIMIT_COSTLY = ""
    settings.CTXWEB_TASKS_INLINE = True
    client = world.api(world.operator_key)
    response = client.post(
        "/api/v1/sessions/s1/turns",
        data=json.dumps(body(history(2))),
        content_type="application/json",
    )
    assert response.status_code == 201
    return world.operator_key


def test_the_schema_lists_every_api_operation() -> None:
    documented = {(op.method.upper(), op.path) for op in OPERATIONS}
    served = {
        (
            call.method,
            call.path.format(
                sid="{external_id}",
                op="{operation_id}",
                art="{artifact_id}",
                imp="{job_id}",
                unr="{unread_id}",
                rep="{replay_id}",
            ).split("?")[0],
        )
        for name, calls in API.items()
        if name not in ("api-schema", "api-docs")  # the schema's own pages are not in it
        for call in calls
    }
    assert documented == {(m, p.replace("/turns/0", "/turns/{index}")) for m, p in served}


def test_the_schema_names_the_conflict_of_an_ambiguous_short_artifact_id() -> None:
    responses = served_schema()["paths"]["/api/v1/artifacts/{artifact_id}"]["get"]["responses"]
    assert "ambiguous" in responses["409"]["description"]
    assert "409" not in served_schema()["paths"]["/api/v1/sessions"]["get"]["responses"]


@pytest.mark.django_db
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_the_api_conforms_to_its_schema(operation: Any, operator_key: str) -> None:
    headers = {"Authorization": f"Bearer {operator_key}"}

    # Valid requests and invalid ones (wrong types, missing fields): both must stay below 500.
    cases = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )

    @given(case=cases)
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        response = case.call(headers=headers)
        assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])
        case.validate_response(
            response,
            checks=[status_code_conformance, content_type_conformance, response_schema_conformance],
            headers=headers,
        )

    with same_connection():
        check()
