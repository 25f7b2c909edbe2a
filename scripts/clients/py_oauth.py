#!/usr/bin/env python3
"""Sign in to toolgate through a real OpenID Provider with the official MCP Python SDK.

Usage:  py_oauth.py MCP_URL ISSUER

What it checks, printing one `ok: ...` line each (exit 1 at the first failure):
  1. the SDK's OAuth client (mcp.client.auth.OAuthClientProvider), given only the MCP URL:
     the 401 leads it to toolgate's Protected Resource Metadata, then to the issuer's
     metadata; it registers itself (dynamic registration), signs `ana` in through the
     provider's interaction form (headless: this script fills the login and consent forms),
     redeems the code with PKCE and the `resource` parameter, and lists and calls tools;
  2. the access token it got: for this server (`aud`), one tier scope, ana's groups;
  3. a token for another audience (a real one from the same provider): 401 invalid_token;
  4. an expired token (the provider's `short-lived` client, 2 s): 401 invalid_token;
  5. a readonly token calling a write tool: 403 insufficient_scope naming toolgate:operator;
     the SDK, on that 403, signs in again asking for the scopes it held plus that one (its
     step-up), and the call goes through in the same session, at the higher tier; a token for
     toolgate:operator alone calls the tool too.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
import sys
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:1/callback"


def fail(what: str) -> None:
    print(f"FAIL: {what}")
    sys.exit(1)


def ok(what: str) -> None:
    print(f"ok: {what}")


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


async def sign_in(auth_url: str, user: str) -> dict[str, str]:
    """Follows the provider's redirects and fills its login and consent forms as `user`,
    until it redirects to REDIRECT; that redirect's query parameters."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as browser:
        url, response = auth_url, await browser.get(auth_url)
        for _ in range(20):
            if response.status_code in (302, 303):
                url = urljoin(url, response.headers["location"])
                if url.startswith(REDIRECT):
                    return {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
                response = await browser.get(url)
                continue
            prompt = re.search(r'name="prompt" value="([a-z]+)"', response.text)
            action = re.search(r'action="([^"]+)"', response.text)
            if response.status_code != 200 or not prompt or not action:
                fail(f"the provider answered {response.status_code} at {url}: {response.text[:300]}")
            form = {"prompt": prompt.group(1)}
            if prompt.group(1) == "login":
                form.update(login=user, password="any password")
            response = await browser.post(urljoin(url, action.group(1)), data=form)
        fail("the provider never redirected back")
    raise AssertionError


class Memory:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Refused(Exception):
    """The provider answered the SDK's authorization request with an error."""


def sdk_provider(url: str, user: str, storage: Memory, sign_ins: list[str]) -> OAuthClientProvider:
    redirected: dict[str, str] = {}

    async def redirect_handler(auth_url: str) -> None:
        query = parse_qs(urlparse(auth_url).query)
        sign_ins.append(query.get("scope", [""])[0])
        if "code_challenge" not in query or query.get("code_challenge_method") != ["S256"]:
            fail(f"the SDK asked without PKCE: {auth_url}")
        if "resource" not in query:
            fail(f"the SDK asked without the resource parameter: {auth_url}")
        redirected.clear()
        redirected.update(await sign_in(auth_url, user))
        if "code" not in redirected:
            raise Refused(f"{redirected.get('error')}: {redirected.get('error_description')} ({redirected.get('scope', '')})")

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirected["code"], state=redirected.get("state"), iss=redirected.get("iss"))

    metadata = OAuthClientMetadata(
        client_name="toolgate-e2e",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(url, metadata, storage, redirect_handler, callback_handler)


async def raw_token(issuer: str, user: str, resource: str, scope: str, client_name: str) -> str:
    """An access token from the provider by hand (registration, PKCE, resource): for the
    tokens the SDK would never ask for."""
    async with httpx2.AsyncClient(timeout=10) as http:
        meta = (await http.get(f"{issuer}/.well-known/openid-configuration")).json()
        reg = await http.post(meta["registration_endpoint"], json={
            "client_name": client_name, "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code"], "response_types": ["code"]})
        if reg.status_code != 201:
            fail(f"registration refused: {reg.text}")
        client_id = reg.json()["client_id"]
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = {"client_id": client_id, "response_type": "code", "redirect_uri": REDIRECT, "scope": scope,
                 "resource": resource, "code_challenge": challenge, "code_challenge_method": "S256", "state": "s"}
        redirected = await sign_in(f"{meta['authorization_endpoint']}?{urlencode(query)}", user)
        token = await http.post(meta["token_endpoint"], data={
            "grant_type": "authorization_code", "code": redirected["code"], "redirect_uri": REDIRECT,
            "client_id": client_id, "code_verifier": verifier, "resource": resource})
        if token.status_code != 200:
            fail(f"token refused: {token.text}")
        return token.json()["access_token"]


async def call_raw(url: str, token: str, name: str, arguments: dict[str, Any]) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(url, json=body, headers={
            "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25",
            "Accept": "application/json, text/event-stream"})


async def main(url: str, issuer: str) -> None:
    storage, sign_ins = Memory(), []
    auth = sdk_provider(url, "ana", storage, sign_ins)
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            tools = (await client.list_tools()).tools
            result = await client.call_tool("list_agents", {})
    if not tools or result.is_error:
        fail(f"listed {len(tools)} tools; list_agents: {result}")
    ok(f"python SDK signed ana in through the provider and called list_agents ({len(tools)} tools listed)")
    tiers = [s for s in (sign_ins[0].split() if len(sign_ins) == 1 else []) if s.startswith("toolgate:")]
    if tiers != ["toolgate:readonly"]:
        fail(f"the SDK should have asked once, for the challenged tier scope: {sign_ins}")
    ok("the SDK asked for the scope the 401 named, with PKCE and the resource parameter")
    claims = claims_of(storage.tokens.access_token)
    if claims.get("aud") != url or claims.get("scope") != "toolgate:readonly" or claims.get("groups") != ["fleet-viewers"]:
        fail(f"unexpected access token claims: {claims}")
    ok(f"the access token is for {url} with one tier scope and ana's groups")

    other = await raw_token(issuer, "ana", "https://other.example/mcp", "toolgate:readonly", "other-audience")
    r = await call_raw(url, other, "list_agents", {})
    if r.status_code != 401 or 'error="invalid_token"' not in r.headers.get("www-authenticate", ""):
        fail(f"a token for another audience: {r.status_code} {r.headers.get('www-authenticate')} {r.text}")
    ok("a real token for another audience is refused (401 invalid_token)")

    short = await raw_token(issuer, "ana", url, "toolgate:readonly", "short-lived")
    if (await call_raw(url, short, "list_agents", {})).status_code != 200:
        fail("the short-lived token was refused while fresh")
    await asyncio.sleep(4.5)
    r = await call_raw(url, short, "list_agents", {})
    if r.status_code != 401 or "expired" not in r.text:
        fail(f"an expired token: {r.status_code} {r.text}")
    ok("the same token, expired, is refused (401 invalid_token, 'expired')")

    omar = await raw_token(issuer, "omar", url, "toolgate:readonly", "step-up")
    args = {"agent_id": "agt-0000000000000000", "key": "env", "value": "prod"}
    r = await call_raw(url, omar, "set_tag", args)
    challenge = r.headers.get("www-authenticate", "")
    if r.status_code != 403 or 'error="insufficient_scope"' not in challenge or 'scope="toolgate:operator"' not in challenge:
        fail(f"a readonly token calling set_tag: {r.status_code} {challenge} {r.text}")
    ok("a readonly token calling set_tag gets 403 insufficient_scope naming toolgate:operator")

    # The SDK's own step-up (SEP-2350): on the 403 it signs in again, asking for the scopes it
    # held and the one named; toolgate takes the highest tier of such a token, so the person
    # leaves their first tier in the same session.
    storage, sign_ins = Memory(), []
    auth = sdk_provider(url, "omar", storage, sign_ins)
    outcome = "was not made"
    try:
        async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                result = await client.call_tool("set_tag", args)
                # The gate let it through: the handler answers (there is no such agent here).
                outcome = "ran" if "agt-0000000000000000" in str(result.content) else f"isError: {result.content}"
    except Exception as e:  # noqa: BLE001 - the outcome is what is reported
        outcome = f"raised {type(e).__name__}"
    print(f"step-up: the SDK asked for {sign_ins}; the retried call {outcome}")
    if len(sign_ins) < 2 or not {"toolgate:readonly", "toolgate:operator"} <= set(sign_ins[-1].split()):
        fail(f"the SDK did not ask for the union of toolgate:readonly and toolgate:operator after the 403: {sign_ins}")
    if outcome != "ran":
        fail(f"the stepped-up call did not run: {outcome}")
    scopes = set(claims_of(storage.tokens.access_token).get("scope", "").split())
    if not {"toolgate:readonly", "toolgate:operator"} <= scopes:
        fail(f"the stepped-up token's scopes: {scopes}")
    ok("on the 403 the SDK stepped up from readonly to operator in one session; set_tag reached its handler")

    # Signing in for that tier alone works: the call runs.
    operator = await raw_token(issuer, "omar", url, "toolgate:operator", "operator")
    r = await call_raw(url, operator, "set_tag", args)
    if r.status_code != 200 or "agt-0000000000000000" not in r.text:
        fail(f"an operator token calling set_tag: {r.status_code} {r.text}")
    ok("a token for toolgate:operator alone calls set_tag (the handler answers)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    asyncio.run(main(sys.argv[1], sys.argv[2]))
