// Resources, prompts and completions with @modelcontextprotocol/client 2.x (tests/gateway/test_clients.py).
// Usage: node surface_ts.mjs MODE URL ID_PREFIX   (MODE: legacy | auto | 2026-07-28, a pin)
// Prints one JSON object, the same members as surface_sdk2.py.
const [mode, url, prefix] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
const negotiation = mode === "legacy" || mode === "auto" ? { mode } : { mode: { pin: mode } };
const client = new Client({ name: "s3rm-test-surface", version: "2.0.0" }, { versionNegotiation: negotiation });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const resources = await client.listResources();
const out = {
  protocol_version: client.getNegotiatedProtocolVersion?.() ?? null,
  resources,
  read: await client.readResource({ uri: resources.resources[0].uri }),
  templates: await client.listResourceTemplates(),
  prompts: (await client.listPrompts()).prompts.map((p) => p.name),
};
const prompt = await client.getPrompt({ name: "record_lesson", arguments: { topic: "allocator", language: "en" } });
out.prompt_text = prompt.messages[0].content.text;
out.ids = (await client.complete({ ref: { type: "ref/resource", uri: "lesson://{id}" },
                                  argument: { name: "id", value: prefix } })).completion.values;
out.relations = (await client.complete({ ref: { type: "ref/prompt", name: "revise_lesson" },
                                        argument: { name: "relation", value: "su" } })).completion.values;
await client.close();
console.log(JSON.stringify(out));
