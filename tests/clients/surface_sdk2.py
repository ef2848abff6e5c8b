"""Resources, prompts and completions with python-sdk 2.x ``mcp.Client`` (tests/gateway/test_clients.py).

Usage: python surface_sdk2.py URL MODE ID_PREFIX   (MODE: auto | legacy | 2026-07-28)
Prints one JSON object: the negotiated version, the first resources/list page, the read of its
first resource, the resource templates, the prompt names, one prompt text and the Lesson ids
completed from ID_PREFIX.
"""
import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import PromptReference, ResourceTemplateReference


def dump(model) -> dict:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def main(url: str, mode: str, prefix: str) -> dict:
    async with Client(streamable_http_client(url), mode=mode) as client:
        listed = await client.list_resources()
        read = await client.read_resource(listed.resources[0].uri)
        templates = await client.list_resource_templates()
        prompts = await client.list_prompts()
        prompt = await client.get_prompt("record_lesson", {"topic": "allocator", "language": "en"})
        ids = await client.complete(ResourceTemplateReference(type="ref/resource", uri="lesson://{id}"),
                                    {"name": "id", "value": prefix})
        relations = await client.complete(PromptReference(type="ref/prompt", name="revise_lesson"),
                                          {"name": "relation", "value": "su"})
        return {"protocol_version": client.protocol_version, "resources": dump(listed), "read": dump(read),
                "templates": dump(templates), "prompts": [p.name for p in prompts.prompts],
                "prompt_text": prompt.messages[0].content.text, "ids": ids.completion.values,
                "relations": relations.completion.values}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
