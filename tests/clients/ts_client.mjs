// Drive the gateway with a TypeScript MCP client (tests/gateway/test_clients.py).
// Usage: node ts_client.mjs sdk1|client2 MODE URL TOKEN READ_ARGS_JSON WRITE_ARGS_JSON
//   sdk1: @modelcontextprotocol/sdk 1.x (MODE ignored); client2: @modelcontextprotocol/client 2.x,
//   MODE legacy | auto | 2026-07-28 (a pin). Prints one JSON object: the negotiated version, tool
//   names, the search_lessons and create_lesson_draft results (the client validates structuredContent
//   against each tool's outputSchema), and every HTTP request sent (Mcp-Method, version, status).
const [pkg, mode, url, token, readArgs, writeArgs] = process.argv.slice(2);
const exchange = [];
const recordingFetch = async (input, init = {}) => {
  const response = await fetch(input, init);
  const headers = new Headers(init.headers ?? {});
  exchange.push({
    method: init.method ?? "GET",
    protocol_version: headers.get("mcp-protocol-version"),
    mcp_method: headers.get("mcp-method"),
    mcp_name: headers.get("mcp-name"),
    status: response.status,
  });
  return response;
};
const requestInit = { headers: { Authorization: `Bearer ${token}` } };
let client;
let transport;
if (pkg === "sdk1") {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  client = new Client({ name: "s3rm-test-sdk1", version: "1.0.0" });
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit, fetch: recordingFetch });
} else {
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  const negotiation = mode === "legacy" || mode === "auto" ? { mode } : { mode: { pin: mode } };
  client = new Client({ name: "s3rm-test-client2", version: "2.0.0" }, { versionNegotiation: negotiation });
  transport = new StreamableHTTPClientTransport(new URL(url), { requestInit, fetch: recordingFetch });
}
await client.connect(transport);
const out = {
  protocol_version: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null,
  server_name: client.getServerVersion()?.name ?? null,
};
const listed = await client.listTools();
out.tools = listed.tools.map((tool) => tool.name);
out.read = await client.callTool({ name: "search_lessons", arguments: JSON.parse(readArgs) });
out.write = await client.callTool({ name: "create_lesson_draft", arguments: JSON.parse(writeArgs) });
await client.close();
out.exchange = exchange;
console.log(JSON.stringify(out));
