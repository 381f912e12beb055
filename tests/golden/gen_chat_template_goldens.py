#!/usr/bin/env python3
"""Chat-template goldens from Python jinja2, set up as Hugging Face transformers renders
chat templates (transformers/utils/chat_template_utils.py): an ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks and the loopcontrols extension, transformers' tojson,
raise_exception and strftime_now; render(messages=, tools=, documents=None,
add_generation_prompt=, bos_token=, eos_token=, **chat_template_kwargs) and transformers'
continue_final_message cut. strftime_now formats a fixed time (FIXED_NOW), which the C++
test passes too.

Renders every template of tests/data/chat_templates/*.jinja with every conversation of
tests/data/chat_templates/conversations.json and writes tests/data/golden/chat_template_goldens.json:
the text, or that rendering failed (with jinja2's message). The C++ test
(tests/runtime/text/chat/jinja/chat_template_golden_test.cpp) must match byte for byte.

usage: python3 tests/golden/gen_chat_template_goldens.py   (needs python3-jinja2 >= 3.1)
       python3 tests/golden/gen_chat_template_goldens.py --templates DIR --out FILE
         renders another collection of *.jinja files (e.g. llama.cpp's models/templates) with the
         same conversations; the C++ test checks FILE when TROUPE_CHAT_TEMPLATE_GOLDENS names it.
"""
import argparse
import datetime
import json
import os
import sys

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
TEMPLATES = os.path.join(DATA, "chat_templates")
OUT = os.path.join(DATA, "golden", "chat_template_goldens.json")
FIXED_NOW = datetime.datetime(2026, 1, 15, 9, 30, 0)  # the C++ test's RenderOptions::now (local time)


class GenerationTracker(Extension):
    """transformers' {% generation %} tag: renders its body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def compile_template(source):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return FIXED_NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def continue_final_message(rendered, messages):
    """transformers' apply_chat_template(continue_final_message=True) cut."""
    final = messages[-1]["content"]
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if "text" in block:
                final = block["text"]
                break
        else:
            raise ValueError("continue_final_message is set but the final message has no text content")
    if final.strip() not in rendered:
        raise ValueError("continue_final_message is set but the final message does not appear in the chat "
                         "after applying the chat template")
    loc = rendered.rindex(final.strip())
    if rendered[loc:loc + len(final.lstrip())] == final:
        return rendered[:loc + len(final.lstrip())]
    return rendered[:loc + len(final.strip())]


def render(source, tokens, conv):
    messages = conv["messages"]
    kwargs = dict(conv.get("chat_template_kwargs", {}))
    context = {"bos_token": tokens.get("bos_token", ""), "eos_token": tokens.get("eos_token", "")}
    context.update(kwargs)
    template = compile_template(source)
    out = template.render(messages=messages, tools=conv.get("tools"), documents=None,
                          add_generation_prompt=conv.get("add_generation_prompt", False), **context)
    if conv.get("continue_final_message", False):
        out = continue_final_message(out, messages)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--templates", default=TEMPLATES, help="folder of *.jinja templates")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    template_dir = os.path.abspath(args.templates)
    with open(os.path.join(TEMPLATES, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    names = sorted(n[:-len(".jinja")] for n in os.listdir(template_dir) if n.endswith(".jinja"))
    cases = []
    for name in names:
        with open(os.path.join(template_dir, name + ".jinja"), encoding="utf-8", newline="") as f:
            source = f.read()
        tokens_path = os.path.join(template_dir, name + ".tokens.json")
        tokens = {"bos_token": "<s>", "eos_token": "</s>"}
        if os.path.exists(tokens_path):
            with open(tokens_path, encoding="utf-8") as f:
                tokens = json.load(f)
        for conv in conversations:
            case = {"template": name, "conversation": conv["name"], "bos_token": tokens["bos_token"],
                    "eos_token": tokens["eos_token"]}
            try:
                case["output"] = render(source, tokens, conv)
            except Exception as e:  # jinja2's TemplateError, TypeError, ValueError ...: the request fails
                case["error"] = f"{type(e).__name__}: {e}"
            cases.append(case)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    header = {"generator": "tests/golden/gen_chat_template_goldens.py", "jinja2": jinja2.__version__,
              "fixed_now": FIXED_NOW.isoformat()}
    if template_dir != os.path.abspath(TEMPLATES):
        header["template_dir"] = template_dir  # the committed goldens name none: the test reads tests/data
    with open(out, "w", encoding="utf-8") as f:
        json.dump({**header, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error" in c for c in cases)
    print(f"{len(names)} templates x {len(conversations)} conversations = {len(cases)} cases "
          f"({errors} render errors) -> {os.path.relpath(out)}")


if __name__ == "__main__":
    sys.exit(main())
