"""The OpenAPI schema is served and validates without warnings; the docs page loads offline."""

from __future__ import annotations


def test_it_validates_the_schema_without_warnings(api_schema):
    assert "/api/rl/packs/{pack}/calls/import/" in api_schema
    assert "/api/rl/calls/" in api_schema


def test_it_serves_the_schema_and_the_docs_to_a_signed_in_user(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    assert "Levers9 Arena API" in schema.content.decode()
    docs = owner_client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    assert b"cdn.jsdelivr" not in docs.content


def test_every_operation_documents_the_errors_it_can_answer(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operations = [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]
    assert len(operations) > 40
    for path, method, operation in operations:
        documented = set(operation["responses"])
        assert {"400", "401", "403", "404", "500"} <= documented, (method, path, documented)
        if method != "get":
            assert {"409", "429"} <= documented, (method, path)
