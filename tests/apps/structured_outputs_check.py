#!/usr/bin/env python3
"""Structured outputs of a running `troupe serve` (SmolLM2), each finished output
checked by a validator that is not troupe's: Python's `jsonschema` (with its format
checker) for JSON schemas, `re.fullmatch` for regexes, the `lark` package for the Lark
grammar and for a Lark transcription of the GBNF grammar, pydantic through the OpenAI
SDK's `chat.completions.parse`. Outputs cut short by max_tokens cannot be judged and
are counted; every kind must finish at least once.

Usage: structured_outputs_check.py BASE_URL (e.g. http://127.0.0.1:8000/v1).
Prints one line per check; exits non-zero on the first failure."""
import json
import re
import sys
from typing import List, Optional

import jsonschema
import lark
import openai
from openai import OpenAI
from pydantic import BaseModel

SEEDS = [1, 2, 3]
MORE_SEEDS = [1, 2, 3, 4, 5]  # where SmolLM2 often writes until max_tokens


def chat(client, model, content, max_tokens=160, seed=1, temperature=0.8, **extra):
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}],
                                       max_tokens=max_tokens, temperature=temperature, seed=seed, extra_body=extra)
    return r.choices[0].message.content or "", r.choices[0].finish_reason


def check_finished(name, outputs, judge):
    finished = [text for text, reason in outputs if reason == "stop"]
    for text in finished:
        judge(text)
    assert finished, f"{name}: no output finished within max_tokens: {outputs!r}"
    print(f"ok {name}: {len(finished)}/{len(outputs)} finished and valid")


def json_judge(schema):
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)

    def judge(text):
        value = json.loads(text)
        errors = list(validator.iter_errors(value))
        assert not errors, f"{text!r} breaks the schema: {errors[0].message}"
    return judge


SCHEMAS = {
    # $ref/$defs, anyOf with null, an integer range, string lengths, an enum.
    "refs_and_nulls": {
        "$defs": {
            "address": {"type": "object", "properties": {
                "city": {"type": "string", "minLength": 2, "maxLength": 12},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["city", "zip"], "additionalProperties": False},
        },
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 16},
            "age": {"type": "integer", "minimum": 18, "maximum": 99},
            "home": {"$ref": "#/$defs/address"},
            "work": {"anyOf": [{"$ref": "#/$defs/address"}, {"type": "null"}]},
            "role": {"enum": ["admin", "user", "guest"]},
        },
        "required": ["name", "age", "home", "work", "role"],
        "additionalProperties": False,
    },
    # Formats and exclusive number bounds.
    "formats": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "born": {"type": "string", "format": "date"},
            "ip": {"type": "string", "format": "ipv4"},
            "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 1, "maxItems": 3},
        },
        "required": ["id", "born", "ip", "score", "tags"],
        "additionalProperties": False,
    },
    # A recursive $ref (a tree), bounded by maxItems, and a root that is not an object.
    "recursive_list": {
        "type": "array", "minItems": 1, "maxItems": 2,
        "items": {"$ref": "#/$defs/node"},
        "$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer", "minimum": -5, "maximum": 5},
            "kids": {"type": "array", "maxItems": 1, "items": {"$ref": "#/$defs/node"}}},
            "required": ["v"], "additionalProperties": False}},
    },
    # Unknown keywords and annotations are ignored (JSON Schema's rule).
    "unknown_keywords": {
        "type": "object", "title": "t", "decription": "misspelt", "x-vendor": {"a": 1},
        "properties": {"ok": {"type": "boolean", "id": "no-effect"}}, "required": ["ok"],
        "additionalProperties": False,
    },
}


def whitespace_outside_strings(text):
    in_string = escaped = False
    for c in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (c == "\\", c != '"')
        elif c == '"':
            in_string = True
        elif c in " \t\r\n":
            return True
    return False


def check_schemas(client, model):
    for name, schema in SCHEMAS.items():
        outputs = [chat(client, model, "Give me an example as JSON.", seed=s, max_tokens=200,
                        response_format={"type": "json_schema", "json_schema": {"name": name, "schema": schema}})
                   for s in MORE_SEEDS]
        check_finished(f"json_schema {name}", outputs, json_judge(schema))
    # The same through vLLM's spellings, without whitespace.
    schema = SCHEMAS["refs_and_nulls"]
    outputs = [chat(client, model, "A user as JSON.", seed=s, max_tokens=200,
                    structured_outputs={"json": schema, "disable_any_whitespace": True}) for s in SEEDS]
    check_finished("structured_outputs.json compact", outputs, json_judge(schema))
    for text, reason in outputs:
        if reason == "stop":
            assert not whitespace_outside_strings(text), f"whitespace outside strings: {text!r}"
    outputs = [chat(client, model, "Any JSON object.", seed=s, response_format={"type": "json_object"})
               for s in MORE_SEEDS]
    check_finished("json_object", outputs, lambda t: isinstance(json.loads(t), dict) or (_ for _ in ()).throw(
        AssertionError(f"not an object: {t!r}")))


def check_regex(client, model):
    pattern = r"(yes|no), because [a-z ]{3,30}\."
    outputs = [chat(client, model, "Is the sky blue? Answer yes or no, then why.", seed=s, max_tokens=40,
                    structured_outputs={"regex": pattern}) for s in SEEDS]
    check_finished("structured_outputs.regex", outputs,
                   lambda t: re.fullmatch(pattern, t) or (_ for _ in ()).throw(AssertionError(f"{t!r} !~ {pattern}")))
    outputs = [chat(client, model, "A phone number.", seed=s, max_tokens=20, guided_regex=r"\d{3}-\d{4}")
               for s in SEEDS]
    check_finished("guided_regex", outputs, lambda t: re.fullmatch(r"\d{3}-\d{4}", t) or (_ for _ in ()).throw(
        AssertionError(repr(t))))


LARK_GRAMMAR = r"""
start: sentence
sentence: subject " " verb " " object "."
subject: "the cat" | "a dog" | "my friend"
verb: "sees" | "likes"
object: NUMBER " birds" | "the " WORD
NUMBER: /[1-9][0-9]?/
WORD: /[a-z]{2,10}/
"""

# A GBNF grammar (llama.cpp's notation, recursive) and the same language in Lark.
GBNF_GRAMMAR = r"""
root ::= "[" item ("," item)* "]"
item ::= num | "(" item "+" item ")"
num ::= [1-9] [0-9]?
"""
GBNF_AS_LARK = r"""
start: "[" item ("," item)* "]"
item: NUM | "(" item "+" item ")"
NUM: /[1-9][0-9]?/
"""


def lark_judge(grammar):
    parser = lark.Lark(grammar, start="start", parser="earley", lexer="dynamic")

    def judge(text):
        parser.parse(text)  # raises on text outside the language
    return judge


def check_grammars(client, model):
    outputs = [chat(client, model, "Say something about an animal.", seed=s, max_tokens=40,
                    structured_outputs={"grammar": LARK_GRAMMAR}) for s in SEEDS]
    check_finished("structured_outputs.grammar (Lark)", outputs, lark_judge(LARK_GRAMMAR))
    outputs = [chat(client, model, "A list of sums.", seed=s, max_tokens=120, temperature=0.5,
                    structured_outputs={"grammar": GBNF_GRAMMAR}) for s in MORE_SEEDS + [6, 7]]
    check_finished("structured_outputs.grammar (GBNF)", outputs, lark_judge(GBNF_AS_LARK))


def check_structural_tag(client, model):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                               "unit": {"enum": ["c", "f"]}},
              "required": ["city", "unit"], "additionalProperties": False}
    fmt = {"type": "structural_tag", "triggers": ["<weather="],
           "structures": [{"begin": "<weather=", "schema": schema, "end": ">"}]}
    judge_json = json_judge(schema)

    def judge(text):
        at = 0
        while (start := text.find("<weather=", at)) >= 0:
            body = text[start + len("<weather="):]
            value, end = json.JSONDecoder().raw_decode(body)
            judge_json(json.dumps(value))
            assert body[end:].startswith(">"), f"no end after the structure: {text!r}"
            at = start + len("<weather=") + end + 1
    prompt = "Write <weather= followed by a JSON object with city and unit, then >, for Paris."
    outputs = [chat(client, model, prompt, seed=s, max_tokens=150, response_format=fmt) for s in MORE_SEEDS]
    check_finished("response_format structural_tag", outputs, judge)
    outputs = [chat(client, model, prompt, seed=s, max_tokens=150,
                    structured_outputs={"structural_tag": json.dumps(fmt)}) for s in MORE_SEEDS]
    check_finished("structured_outputs.structural_tag", outputs, judge)


class Address(BaseModel):
    city: str
    country: Optional[str] = None


class Pet(BaseModel):
    name: str
    age: Optional[int] = None


class Person(BaseModel):
    name: str
    address: Address
    pets: List[Pet]
    nickname: Optional[str]


def check_sdk_parse(client, model):
    schema = Person.model_json_schema()
    assert "$defs" in schema, schema  # nested models: $ref into $defs, Optional: anyOf with null
    finished = 0
    for s in MORE_SEEDS:
        try:
            r = client.chat.completions.parse(model=model, seed=s, temperature=0.8, max_tokens=300,
                                              messages=[{"role": "user", "content": "Describe a person with a pet."}],
                                              response_format=Person)
        except openai.LengthFinishReasonError:
            continue  # cut by max_tokens: nothing to judge
        choice = r.choices[0]
        if choice.finish_reason != "stop":
            continue
        assert isinstance(choice.message.parsed, Person), choice.message
        json_judge(schema)(choice.message.content)
        finished += 1
    assert finished, "chat.completions.parse: no output finished"
    print(f"ok chat.completions.parse(response_format=Person): {finished}/{len(MORE_SEEDS)} parsed")


def check_tools(client, model):
    params = {"type": "object", "$defs": {"unit": {"enum": ["celsius", "fahrenheit"]}},
              "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"$ref": "#/$defs/unit"},
                             "days": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 7}, {"type": "null"}]}},
              "required": ["city", "unit", "days"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": params, "strict": True}},
             {"type": "function", "function": {"name": "get_time", "parameters": {
                 "type": "object", "properties": {"tz": {"type": "string", "maxLength": 12}}, "required": ["tz"]}}}]
    judge = json_judge(params)
    for choice in ({"type": "function", "function": {"name": "get_weather"}}, "required"):
        calls = 0
        for s in SEEDS:
            r = client.chat.completions.create(model=model, seed=s, temperature=0.8, max_tokens=160, tools=tools,
                                               tool_choice=choice,
                                               messages=[{"role": "user", "content": "Weather in Oslo?"}])
            c = r.choices[0]
            if c.finish_reason not in ("stop", "tool_calls"):
                continue
            for call in c.message.tool_calls or []:
                if call.function.name == "get_weather":
                    judge(call.function.arguments)
                else:
                    assert set(json.loads(call.function.arguments)) == {"tz"}, call
                calls += 1
        assert calls, f"tool_choice {choice}: no call finished"
        print(f"ok tools, tool_choice {json.dumps(choice)}: {calls} calls valid")


def main():
    client = OpenAI(base_url=sys.argv[1], api_key="none")
    model = client.models.list().data[0].id
    check_schemas(client, model)
    check_regex(client, model)
    check_grammars(client, model)
    check_structural_tag(client, model)
    check_sdk_parse(client, model)
    check_tools(client, model)
    print("all structured outputs valid")


if __name__ == "__main__":
    main()
