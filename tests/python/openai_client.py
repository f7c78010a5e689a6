"""Drives capot's /v1/embeddings with the official OpenAI Python client.

Usage: openai_client.py BASE_URL API_KEY MODEL ALIAS TEXT...

BASE_URL is the service root (http://127.0.0.1:PORT); the client talks to BASE_URL/v1.
Prints one JSON object on stdout with what the client returned, for tests/http_api.rs to check
against `capot encode`. Every request body the client sent is recorded too, so the test can
see that the client's default really is `encoding_format: base64`.
"""

import json
import sys

import openai


def main() -> None:
    base, key, model, alias, *texts = sys.argv[1:]
    sent = []

    def record(request) -> None:
        sent.append(json.loads(request.content or b"null"))

    client = openai.OpenAI(
        base_url=base.rstrip("/") + "/v1",
        api_key=key,
        max_retries=0,
        timeout=60.0,
        http_client=openai.DefaultHttpxClient(event_hooks={"request": [record]}),
    )

    def call(**kwargs):
        r = client.embeddings.create(**kwargs)
        return {
            "model": r.model,
            "object": r.object,
            "indexes": [d.index for d in r.data],
            "vectors": [list(map(float, d.embedding)) for d in r.data],
            "usage": {"prompt_tokens": r.usage.prompt_tokens, "total_tokens": r.usage.total_tokens},
        }

    def failure(**kwargs):
        try:
            client.embeddings.create(**kwargs)
        except openai.APIStatusError as e:
            return {
                "exception": type(e).__name__,
                "status": e.status_code,
                "message": e.message,
                "body": e.body,
            }
        return {"exception": None}

    out = {
        # The client's default encoding (base64 on the wire, floats to the caller).
        "default_list": call(model=model, input=texts),
        "default_string": call(model=model, input=texts[0]),
        "float_list": call(model=model, input=texts, encoding_format="float"),
        "alias_string": call(model=alias, input=texts[0], encoding_format="float"),
        "token_ids": failure(model=model, input=[[101, 7592, 102]]),
        "unknown_model": failure(model="text-embedding-3-small", input="hello"),
        "wrong_key": None,
    }
    wrong = openai.OpenAI(base_url=base.rstrip("/") + "/v1", api_key=key + "-wrong", max_retries=0, timeout=60.0)
    try:
        wrong.embeddings.create(model=model, input="hello")
        out["wrong_key"] = {"exception": None}
    except openai.APIStatusError as e:
        out["wrong_key"] = {"exception": type(e).__name__, "status": e.status_code, "message": e.message}
    out["sent_encoding_formats"] = [b.get("encoding_format") if isinstance(b, dict) else None for b in sent]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
