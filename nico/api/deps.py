"""FastAPI dependencies: the request-scoped session, the caller, the app context."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import anyio.to_thread
from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.auth import Principal
from nico.api.context import AppContext
from nico.db.raw import commit
from nico.services import orgs


async def get_ctx(request: Request) -> AppContext:
    # async on purpose: FastAPI runs plain ``def`` dependencies in a thread pool, on every request.
    return context_of(request)


def context_of(request: Request) -> AppContext:
    ctx: AppContext = request.app.state.ctx
    return ctx


@asynccontextmanager
async def request_transaction(request: Request) -> AsyncIterator[AsyncSession]:
    """One transaction per request: commits once after the handler returns (before the response is
    sent, so a failed commit becomes an error response), rolls back if anything raises. Services never
    commit; what they ask to send with the commit (a create's quota check) goes out with it, in its
    round trip (:func:`nico.db.raw.commit`), and its refusal is the error response."""
    async with context_of(request).sessions() as session:
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await commit(session)


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """:func:`request_transaction` as a dependency."""
    async with request_transaction(request) as session:
        yield session


async def get_read_session(request: Request) -> AsyncIterator[AsyncSession]:
    """For handlers that only read: no transaction is opened, each query is one round trip."""
    async with context_of(request).read_sessions() as session:
        yield session


async def get_principal(request: Request) -> Principal:
    verifier = context_of(request).verifier
    header = request.headers.get("authorization")
    if verifier.uses_network:
        return await anyio.to_thread.run_sync(verifier.principal, header)
    return verifier.principal(header)


CtxDep = Annotated[AppContext, Depends(get_ctx)]
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session, scope="function")]
PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def tenant_admin(org: str, principal: PrincipalDep) -> Principal:
    principal.require_tenant_admin(org)
    return principal


async def provider_admin(org: str, principal: PrincipalDep) -> Principal:
    principal.require_provider_admin(org)
    return principal


async def provider_or_tenant(org: str, principal: PrincipalDep) -> tuple[bool, bool]:
    return principal.require_provider_or_tenant(org)


# The caller's role in the path's org, checked before anything else the handler declares after it.
TenantAdmin = Annotated[Principal, Depends(tenant_admin)]
ProviderAdmin = Annotated[Principal, Depends(provider_admin)]
ProviderOrTenant = Annotated[tuple[bool, bool], Depends(provider_or_tenant)]


async def provider_or_tenant_viewer(org: str, roles: ProviderOrTenant, session: SessionDep) -> orgs.Viewer:
    """The sides (provider, tenant) a "provider or tenant" caller reads with."""
    provider_role, tenant_role = roles
    return await orgs.viewer(session, org, provider_role=provider_role, tenant_role=tenant_role)


Viewer = Annotated[orgs.Viewer, Depends(provider_or_tenant_viewer)]
