"""Issue 16, items 6 and 7: JWT identity fails closed. The verifier (the object the HTTP
transport runs on every bearer token) is called with tokens signed by a test RSA key:
subjects are normalised as the callers table stores names, an unknown subject gets
nothing unless `jwt_default_role` names a role, a revocation holds in any case or
spacing, `exp` is required, `nbf` honoured, and a server without an audience does not start."""

from __future__ import annotations

import time

import pytest
from fastmcp.server.auth.providers.jwt import RSAKeyPair

from tests.access.conftest import revoke
from ticket_server.access.callers import Caller, open_store
from ticket_server.access.identity import CallerJWTVerifier, IdentityError, caller_from_access_token

ISSUER, AUDIENCE = "https://idp.example", "https://tickets.example/mcp"


@pytest.fixture(scope="module")
def keys() -> RSAKeyPair:
    return RSAKeyPair.generate()


@pytest.fixture
async def verify(settings, keys):
    store = open_store(settings)

    def make(**overrides) -> CallerJWTVerifier:
        jwt_settings = settings.model_copy(
            update={
                "auth_mode": "jwt",
                "jwt_issuer": ISSUER,
                "jwt_audience": AUDIENCE,
                "jwt_public_key": keys.public_key,
                **overrides,
            }
        )
        return CallerJWTVerifier(jwt_settings, store, "http://127.0.0.1:8000")

    yield make
    await store.aclose()


def token(keys: RSAKeyPair, subject: str, **claims) -> str:
    return keys.create_token(
        subject=subject,
        issuer=ISSUER,
        audience=AUDIENCE,
        scopes=["tickets:read"],
        additional_claims=claims or None,
    )


async def caller(verifier: CallerJWTVerifier, jwt: str) -> Caller | None:
    access = await verifier.verify_token(jwt)
    return caller_from_access_token(access) if access is not None else None


async def test_subjects_are_normalised_and_unknown_ones_get_nothing(
    settings, add_caller, verify, keys
) -> None:
    await add_caller("billing", queues=["billing"])
    await add_caller("jrevoked")
    await revoke(settings, " JRevoked ")  # the CLI normalises names the same way
    verifier = verify()
    for subject in ("billing", "BILLING", "billing ", " Billing\t"):
        found = await caller(verifier, token(keys, subject))
        assert (
            found is not None and found.name == "billing" and found.queues == frozenset({"billing"})
        ), subject
    for subject in ("jrevoked", "JREVOKED", " jrevoked ", "stranger", "", "bill ing"):
        assert await caller(verifier, token(keys, subject)) is None, subject


async def test_a_default_role_is_what_an_unknown_subject_gets(
    settings, add_caller, verify, keys
) -> None:
    await add_caller("guest-role", queues=["support"], tool_rate_limit="5/minute")
    await add_caller("jrevoked")
    await revoke(settings, "jrevoked")
    verifier = verify(jwt_default_role="guest-role")
    guest = await caller(verifier, token(keys, "Stranger"))
    assert guest is not None and guest.name == "stranger" and guest.registered is False
    assert guest.queues == frozenset({"support"}) and guest.tool_rate_limit == "5/minute"
    assert guest.scopes == frozenset({"tickets:read"})
    assert (
        await caller(verifier, token(keys, "JRevoked")) is None
    )  # a revoked name never falls back


async def test_a_subject_keeps_every_grant_of_its_row(settings, add_caller, verify, keys) -> None:
    """A JWT subject (or one under the default role) gets its row's write queues,
    confirmation list, toolsets and kind, not only its queues and limits: the verifier
    built the caller from those alone, so a row allowed to write in billing only wrote in
    every queue it reads, its own confirmation list and toolsets gave way to the
    deployment's, and an assistant's notes read as a person's (a review's finding)."""
    grants = {
        "queues": ["billing", "support"],
        "write_queues": ["billing"],
        "confirm_writes": ["add_internal_note"],
        "toolsets": ["read", "respond"],
        "kind": "assistant",
    }
    await add_caller("bot", scopes=("tickets:read", "tickets:write"), **grants)
    verifier = verify(jwt_default_role="bot")
    for subject, registered in (("bot", True), ("stranger", False)):
        jwt = keys.create_token(
            subject=subject,
            issuer=ISSUER,
            audience=AUDIENCE,
            scopes=["tickets:read", "tickets:write"],
        )
        found = await caller(verifier, jwt)
        assert found is not None and found.registered is registered, subject
        assert found.writable_queues == frozenset({"billing"}), subject
        assert found.confirm_writes == frozenset({"add_internal_note"}), subject
        assert found.toolsets == frozenset({"read", "respond"}), subject
        assert found.is_assistant, subject


async def test_exp_is_required_and_nbf_honoured(add_caller, verify, keys) -> None:
    await add_caller("billing")
    verifier = verify()
    assert await caller(verifier, token(keys, "billing")) is not None
    assert await caller(verifier, token(keys, "billing", exp=None)) is None
    assert await caller(verifier, token(keys, "billing", exp=int(time.time()) - 5)) is None
    assert await caller(verifier, token(keys, "billing", nbf=int(time.time()) + 3600)) is None
    assert await caller(verifier, token(keys, "billing", nbf=int(time.time()) - 5)) is not None
    other = keys.create_token(
        subject="billing", issuer=ISSUER, audience="https://other.example", scopes=["tickets:read"]
    )
    assert await caller(verifier, other) is None


async def test_jwt_mode_without_an_audience_does_not_start(verify) -> None:
    with pytest.raises(IdentityError, match="TICKET_SERVER_JWT_AUDIENCE"):
        verify(jwt_audience=None)
