#!/usr/bin/env python3
"""Tool calling with the official OpenAI Python SDK against a running `troupe serve`
(SmolLM2, Gemma 3): a named function and tool_choice "required" (also with
parallel_tool_calls false: exactly one call), whole and streamed, give tool_calls
whose arguments parse and hold to the schema; a call's result fed back gives a
final answer. Usage: openai_sdk_tools.py BASE_URL (e.g. http://127.0.0.1:8000/v1).
Exits non-zero on the first failure."""
import json
import sys

from openai import OpenAI

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}]
MESSAGES = [{"role": "user", "content": "What is the weather like in Paris today?"}]


def check_arguments(name, arguments):
    assert name == "get_weather", name
    args = json.loads(arguments)
    assert set(args) == {"city", "unit"}, args
    assert isinstance(args["city"], str), args
    assert args["unit"] in ("celsius", "fahrenheit"), args


def main():
    client = OpenAI(base_url=sys.argv[1], api_key="none")
    model = client.models.list().data[0].id
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice, extra in ((named, {}), ("required", {}), ("required", {"parallel_tool_calls": False})):
        r = client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, tool_choice=choice,
                                           max_tokens=96, temperature=0, **extra)
        calls = r.choices[0].message.tool_calls
        assert calls, r
        assert extra.get("parallel_tool_calls", True) or len(calls) == 1, calls
        for c in calls:
            assert c.id.startswith("chatcmpl-tool-") and c.type == "function", c
            check_arguments(c.function.name, c.function.arguments)
        streamed = {}
        for chunk in client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, tool_choice=choice,
                                                    max_tokens=96, temperature=0, stream=True, **extra):
            if not chunk.choices:
                continue
            for d in chunk.choices[0].delta.tool_calls or []:
                entry = streamed.setdefault(d.index, {"name": None, "arguments": ""})
                if d.function.name:
                    entry["name"] = d.function.name
                entry["arguments"] += d.function.arguments or ""
        assert len(streamed) == len(calls), streamed
        for entry in streamed.values():
            check_arguments(entry["name"], entry["arguments"])
        print(f"tool_choice={choice} {extra}: ok, {len(calls)} call(s) ({calls[0].function.arguments})")
    # The round trip: the call, its result, a final answer.
    r = client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS, tool_choice=named, max_tokens=96,
                                       temperature=0)
    call = r.choices[0].message.tool_calls[0]
    messages = MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "sunny"})},
    ]
    final = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="none",
                                           max_tokens=48, temperature=0)
    assert final.choices[0].message.content, final
    print("round trip: ok:", final.choices[0].message.content[:60].replace("\n", " "))


if __name__ == "__main__":
    main()
