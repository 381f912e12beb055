#!/usr/bin/env python3
"""/v1/responses with the official OpenAI Python SDK against a running `troupe serve`
(SmolLM2): client.responses.create with text input and instructions, streamed, a
named function call (arguments hold to the schema), and the call's output fed back
for a final answer; store=True is refused with a 400 naming the field.
Usage: openai_sdk_responses.py BASE_URL (e.g. http://127.0.0.1:8000/v1).
Exits non-zero on the first failure."""
import json
import sys

import openai
from openai import OpenAI

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}


def main():
    client = OpenAI(base_url=sys.argv[1], api_key="unused")
    model = client.models.list().data[0].id

    r = client.responses.create(model=model, input="What is the capital of France?",
                                instructions="Answer in one sentence.", max_output_tokens=24, temperature=0)
    assert r.object == "response" and r.output_text, r
    print("text:", repr(r.output_text), r.status, r.usage.input_tokens, r.usage.output_tokens)

    text, types = "", []
    for event in client.responses.create(model=model, input="What is the capital of France?",
                                         instructions="Answer in one sentence.", max_output_tokens=24,
                                         temperature=0, stream=True):
        types.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
    assert types[0] == "response.created" and types[-1] in ("response.completed", "response.incomplete"), types
    assert text == r.output_text, (text, r.output_text)
    print("streamed:", len(types), "events")

    r = client.responses.create(model=model, input="What is the weather like in Paris today?", tools=[TOOL],
                                tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=96,
                                temperature=0)
    calls = [item for item in r.output if item.type == "function_call"]
    assert calls and calls[0].name == "get_weather", r.output
    args = json.loads(calls[0].arguments)
    assert isinstance(args["city"], str) and args["unit"] in ("celsius", "fahrenheit"), args
    print("call:", calls[0].name, calls[0].arguments)

    answer = client.responses.create(
        model=model, tools=[TOOL], tool_choice="none", max_output_tokens=32, temperature=0,
        input=[{"role": "user", "content": "What is the weather like in Paris today?"}, calls[0],
               {"type": "function_call_output", "call_id": calls[0].call_id,
                "output": json.dumps({"temperature": 21, "sky": "sunny"})}])
    assert answer.output_text, answer
    print("answer:", repr(answer.output_text))

    try:
        client.responses.create(model=model, input="Hi", store=True)
        raise AssertionError("store=True was accepted")
    except openai.BadRequestError as e:
        assert "store" in str(e), e
    print("ok")


if __name__ == "__main__":
    main()
