#!/usr/bin/env node
// Sign in to toolgate through a real OpenID Provider with the official TypeScript SDK v2's
// OAuth client (@modelcontextprotocol/client 2.4.0), on one era:
//
//   node ts2_oauth.mjs MCP_URL --era modern|legacy
//
// Given only the MCP URL, the SDK meets the 401, reads toolgate's Protected Resource Metadata
// and the issuer's metadata, registers itself, and sends the person to the provider; this
// script is the person's browser (headless: it follows the redirects, keeps the provider's
// cookies and fills its login and consent forms as `ana`). The SDK then redeems the code with
// PKCE and the `resource` parameter, connects again with the token, lists the tools and calls
// list_agents. Prints `ok: ...` lines; exit 1 at the first failure. Run with the node of
// `source $MCP_CLIENTS_DIR/env.sh` (the SDK is in $MCP_CLIENTS_DIR/ts2); sign_in.sh runs it.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

const dir = process.env.MCP_CLIENTS_DIR || "/tmp/mcp-clients";
const require = createRequire(path.join(dir, "ts2", "package.json"));
const sdk = await import(pathToFileURL(require.resolve("@modelcontextprotocol/client")).href);
const { Client, StreamableHTTPClientTransport, UnauthorizedError } = sdk;

const REDIRECT = "http://127.0.0.1:1/callback";
const [url, flag, era] = process.argv.slice(2);
if (!url || flag !== "--era" || !["modern", "legacy"].includes(era)) {
  console.error("usage: ts2_oauth.mjs MCP_URL --era modern|legacy");
  process.exit(2);
}
const fail = (what) => {
  console.log(`FAIL (${era}): ${what}`);
  process.exit(1);
};

// The person's browser: follows redirects by hand with the provider's cookies, fills its
// login and consent forms, and stops at the redirect back to the client.
async function signIn(authorizationUrl, user) {
  const jar = new Map();
  const send = async (target, init = {}) => {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const response = await fetch(target, { ...init, redirect: "manual", headers: { ...(init.headers || {}), cookie } });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const at = pair.indexOf("=");
      jar.set(pair.slice(0, at).trim(), pair.slice(at + 1));
    }
    return response;
  };
  let target = authorizationUrl.toString();
  let response = await send(target);
  for (let hop = 0; hop < 20; hop += 1) {
    if ([302, 303].includes(response.status)) {
      target = new URL(response.headers.get("location"), target).toString();
      if (target.startsWith(REDIRECT)) return new URL(target).searchParams;
      response = await send(target);
      continue;
    }
    const page = await response.text();
    const prompt = page.match(/name="prompt" value="([a-z]+)"/);
    const action = page.match(/action="([^"]+)"/);
    if (response.status !== 200 || !prompt || !action) fail(`the provider answered ${response.status} at ${target}: ${page.slice(0, 300)}`);
    const form = new URLSearchParams({ prompt: prompt[1] });
    if (prompt[1] === "login") {
      form.set("login", user);
      form.set("password", "any password");
    }
    target = new URL(action[1], target).toString();
    response = await send(target, {
      method: "POST",
      body: form.toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
  }
  fail("the provider never redirected back");
}

// What the SDK keeps between the redirect and the code's redemption: in memory here.
const asked = [];
let redirected = null;
const provider = {
  stored: {},
  get redirectUrl() {
    return REDIRECT;
  },
  get clientMetadata() {
    return {
      client_name: `toolgate-ts2-${era}`,
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation() {
    return this.stored.client;
  },
  saveClientInformation(client) {
    this.stored.client = client;
  },
  tokens() {
    return this.stored.tokens;
  },
  saveTokens(tokens) {
    this.stored.tokens = tokens;
  },
  async redirectToAuthorization(authorizationUrl) {
    const query = authorizationUrl.searchParams;
    asked.push(query.get("scope") || "");
    if (query.get("code_challenge_method") !== "S256" || !query.get("code_challenge")) fail(`asked without PKCE: ${authorizationUrl}`);
    if (!query.get("resource")) fail(`asked without the resource parameter: ${authorizationUrl}`);
    redirected = await signIn(authorizationUrl, "ana");
  },
  saveCodeVerifier(verifier) {
    this.stored.verifier = verifier;
  },
  codeVerifier() {
    return this.stored.verifier;
  },
};

const negotiation = era === "modern" ? { mode: { pin: "2026-07-28" } } : { mode: "legacy" };
const connect = async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: `toolgate-ts2-oauth-${era}`, version: "1.0.0" }, { versionNegotiation: negotiation });
  await client.connect(transport);
  return { client, transport };
};

let session;
try {
  session = await connect();
} catch (e) {
  if (!(e instanceof UnauthorizedError) || !redirected) fail(`the first connection: ${e?.message || e}`);
  if (!redirected.get("code")) fail(`the provider refused: ${redirected.get("error")} ${redirected.get("error_description")}`);
  // Back from the provider: the SDK redeems the code, then connects again with the token.
  const pending = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await pending.finishAuth(redirected);
  session = await connect();
}
if (asked.length !== 1 || !asked[0].split(" ").includes("toolgate:readonly")) fail(`the SDK should have asked once, for the challenged tier scope: ${JSON.stringify(asked)}`);
console.log(`ok: the TypeScript SDK v2 (${era}) signed ana in through the provider, asking for ${asked[0]} with PKCE and the resource`);
const tokens = provider.stored.tokens;
const claims = JSON.parse(Buffer.from(tokens.access_token.split(".")[1], "base64url").toString());
if (claims.aud !== url || claims.scope !== "toolgate:readonly") fail(`unexpected access token claims: ${JSON.stringify(claims)}`);
console.log(`ok: its access token is for ${url} with one tier scope`);
const tools = await session.client.listTools();
const result = await session.client.callTool({ name: "list_agents", arguments: {} });
if (!tools.tools.length || result.isError || result.structuredContent === undefined) fail(`listed ${tools.tools.length} tools; list_agents: ${JSON.stringify(result)}`);
console.log(`ok: with it the SDK listed ${tools.tools.length} tools and called list_agents (${era})`);
await session.client.close().catch(() => {});
process.exit(0);
