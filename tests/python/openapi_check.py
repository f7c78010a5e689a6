"""Checks capot's OpenAPI documents as a client generator would meet them, driven by
tests/http_api.rs: fetches GET /openapi.json from the public and the admin listener, validates
both with openapi-spec-validator (OpenAPI 3.1), then sends real requests to /search and
/v1/embeddings and validates each answer against the schema the document gives for it (so the
document cannot drift from the code). Prints one JSON object of what it found.
"""

import argparse
import json
import urllib.request

from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

TIMEOUT = 60


def get(url):
    with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
        return json.load(r)


def post(url, body, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def response_schema(doc, path, status):
    """The JSON schema of `path`'s POST answer with `status`, its $refs resolvable in place."""
    content = doc["paths"][path]["post"]["responses"][str(status)]["content"]["application/json"]
    return {**content["schema"], "components": doc["components"]}


def errors(doc, path, status, body):
    v = Draft202012Validator(response_schema(doc, path, status))
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in v.iter_errors(body)]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--base", required=True, help="http://HOST:PORT of the public listener")
    ap.add_argument("--admin", required=True, help="http://HOST:PORT of the admin listener")
    ap.add_argument("--admin-token", help="the admin token: also checks write answers")
    args = ap.parse_args()
    out = {}
    public = get(f"{args.base}/openapi.json")
    admin = get(f"{args.admin}/openapi.json")
    for name, doc in (("public", public), ("admin", admin)):
        validate(doc)
        out[name] = {"openapi": doc["openapi"], "paths": sorted(doc["paths"]),
                     "security_schemes": sorted(doc.get("components", {}).get("securitySchemes", {}))}
    answers = [
        ("/search", {"query": "how long do antibiotics take to work", "k": 3}),
        ("/search", {"queries": ["safe temperature for chicken", "capital of australia"], "k": 2}),
        ("/search", {"query": "symptoms of vitamin d deficeincy", "k": 2, "repair": "on"}),
        ("/search", {"queries": ["what is the capital of frnace", "boil an egg"], "k": 2,
                     "repair": "on", "repair_fusion": "repaired"}),
        ("/search", {"queries": ["boil an egg", "capital of australia"], "k": 2,
                     "fusion": ["default", "minilm"]}),
        ("/search", {"query": "", "k": 3}),
        ("/search", {"query": "x", "encoder": "no-such-encoder"}),
        ("/v1/embeddings", {"input": "hello world"}),
        ("/v1/embeddings", {"input": ["a", "b"], "encoding_format": "base64"}),
        ("/v1/embeddings", {"input": 5}),
    ]
    checked = []
    for path, body in answers:
        status, answer = post(f"{args.base}{path}", body)
        checked.append({"path": path, "status": status, "keys": sorted(answer),
                        "errors": errors(public, path, status, answer)})
    if args.admin_token:
        writes = [
            ("/admin/documents", {"documents": [{"id": "openapi-1", "text": "a written document"}]}),
            ("/admin/documents", {"documents": [{"id": "", "text": "no id"}]}),
            ("/admin/documents/delete", {"ids": ["openapi-1"]}),
        ]
        for path, body in writes:
            status, answer = post(f"{args.admin}{path}", body, args.admin_token)
            checked.append({"path": path, "status": status, "keys": sorted(answer),
                            "errors": errors(admin, path, status, answer)})
    out["checked"] = checked
    print(json.dumps(out))


if __name__ == "__main__":
    main()
