#!/usr/bin/env node
// A real client: the official TypeScript SDK v2 (@modelcontextprotocol/client, the stable line,
// speaking 2026-07-28 and the handshake era before it), over Streamable HTTP.
//
//   node ts2_client.mjs URL TOKEN --era modern|legacy [--call TOOL] [--args JSON] [--progress]
//
// `modern` pins 2026-07-28 (server/discover, no session); `legacy` runs the initialize
// handshake. Lists every tool (the SDK validates each result), then with --call calls TOOL:
// with --progress through a progress handler, counting the notifications. A call held for a
// person's approval (-32006) is reported with its approval_id, so the caller can have it
// decided and call again with that id. Prints one JSON summary line; exit 0 when it all worked
// (a held call counts as working: it is what the server promises), 1 otherwise.
// Run with the node of `source $MCP_CLIENTS_DIR/env.sh`; the SDK is in $MCP_CLIENTS_DIR/ts2.
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import path from "node:path";

const dir = process.env.MCP_CLIENTS_DIR || "/tmp/mcp-clients";
const require = createRequire(path.join(dir, "ts2", "package.json"));
const { Client, StreamableHTTPClientTransport } = await import(
  pathToFileURL(require.resolve("@modelcontextprotocol/client")).href
);

const [url, token, ...rest] = process.argv.slice(2);
const opt = (name) => {
  const i = rest.indexOf(name);
  return i >= 0 ? rest[i + 1] : undefined;
};
const era = opt("--era");
if (!url || !token || !["modern", "legacy"].includes(era)) {
  console.error("usage: ts2_client.mjs URL TOKEN --era modern|legacy [--call TOOL] [--args JSON] [--progress]");
  process.exit(2);
}
const callName = opt("--call");
const callArgs = JSON.parse(opt("--args") || "{}");
const wantProgress = rest.includes("--progress");

const summary = { ok: false, era };
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const negotiation = era === "modern" ? { mode: { pin: "2026-07-28" } } : { mode: "legacy" };
const client = new Client({ name: "toolgate-ts2-probe", version: "1.0.0" }, { versionNegotiation: negotiation });
try {
  await client.connect(transport);
  summary.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null;
  const tools = await client.listTools();
  summary.tools = tools.tools.length;
  if (callName) {
    let progress = 0;
    const options = wantProgress ? { onprogress: () => { progress += 1; } } : undefined;
    try {
      const result = await client.callTool({ name: callName, arguments: callArgs }, options);
      summary.call = { isError: Boolean(result.isError), structured: result.structuredContent !== undefined };
      if (wantProgress) summary.call.progressNotifications = progress;
    } catch (e) {
      if (e?.code !== -32006) throw e;
      summary.call = { held: true, approval_id: e.data?.approval_id ?? null };
    }
  }
  summary.ok = true;
} catch (e) {
  summary.error = String(e?.message || e);
  if (e?.code !== undefined) summary.code = e.code;
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(summary));
process.exit(summary.ok ? 0 : 1);
