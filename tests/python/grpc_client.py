"""A gRPC client of capot, driven by tests/grpc_api.rs: an outside user of the API with grpcio.

The stubs are generated at test time with grpc_tools.protoc from the project's proto/ (capot.v1)
and from the standard health and reflection protos in tests/python/protos/grpc_std; their
directory is given with --stubs. Prints one JSON object of what it observed; the Rust test
asserts on it. Every call has a deadline so the script always ends.

Modes:
  main  Search, batch Search, SearchStream, Embed, Info, health, reflection, error cases.
  auth  The same service with an API key: calls without, with a wrong and with the right key.
  hold  Opens a SearchStream, prints "answered" once the first request is answered, then keeps
        the stream open until the server ends it (the test stops the server meanwhile).
  search  Runs the Search requests of --requests (a JSON list of SearchRequest fields) and prints
        each response as JSON (protobuf field names), for comparing with HTTP's /search.
  fuzz  Hostile messages, seeded: raw random bytes as Search, Embed and SearchStream messages,
        and well-formed ones with random field values (control characters, huge or zero k and
        ef, unknown encoders and modes, a megabyte of one character); counts the status codes
        and checks that the service still answers health and a real search afterwards.
"""

import argparse
import json
import math
import sys

DEADLINE = 30.0


def code_name(err):
    """The gRPC status code name of an RpcError (e.g. "INVALID_ARGUMENT")."""
    return err.code().name


def error_of(call):
    """Runs call(); returns None on success or {code, message, error_code} of the RpcError."""
    import grpc

    try:
        call()
        return None
    except grpc.RpcError as e:
        trailing = dict(e.trailing_metadata() or ())
        return {
            "code": code_name(e),
            "message": e.details(),
            "error_code": trailing.get("capot-error-code"),
        }


def hits_view(result):
    return [
        {"id": h.id, "score": h.score, "rank": h.rank, "title": h.title, "has_text": bool(h.text)}
        for h in result.hits
    ]


def main_mode(channel, pb, pb_grpc, health_pb, health_grpc, refl_pb, refl_grpc):
    out = {}
    stub = pb_grpc.RetrievalStub(channel)

    # Health first: the test waited for /ready, so the service must be SERVING.
    health = health_grpc.HealthStub(channel)
    out["health"] = health_pb.HealthCheckResponse.ServingStatus.Name(
        health.Check(health_pb.HealthCheckRequest(service=""), timeout=DEADLINE).status
    )
    out["health_retrieval"] = health_pb.HealthCheckResponse.ServingStatus.Name(
        health.Check(health_pb.HealthCheckRequest(service="capot.v1.Retrieval"), timeout=DEADLINE).status
    )

    out["health_unknown"] = error_of(
        lambda: health.Check(health_pb.HealthCheckRequest(service="no.such.Service"), timeout=DEADLINE)
    )
    watch = health.Watch(health_pb.HealthCheckRequest(service="capot.v1.Retrieval"), timeout=DEADLINE)
    out["health_watch_first"] = health_pb.HealthCheckResponse.ServingStatus.Name(next(watch).status)
    watch.cancel()

    # One query.
    r = stub.Search(pb.SearchRequest(queries=["how long do antibiotics take to work"], k=5), timeout=DEADLINE)
    out["search"] = {
        "results": [hits_view(q) for q in r.results],
        "encoder": {"name": r.encoder.name, "version": r.encoder.version},
        "timings": {
            "tokenize_ms": r.timings.tokenize_ms,
            "encode_ms": r.timings.encode_ms,
            "search_ms": r.timings.search_ms,
            "total_ms": r.timings.total_ms,
        },
    }

    # k left unset: the default, 10.
    r = stub.Search(pb.SearchRequest(queries=["symptoms of vitamin d deficiency"]), timeout=DEADLINE)
    out["search_default_k"] = len(r.results[0].hits)

    # A batch: one result list per query, in order.
    r = stub.Search(
        pb.SearchRequest(
            queries=["how long do antibiotics take to work", "symptoms of vitamin d deficiency"],
            k=3,
            encoder="default",
            ef=64,
        ),
        timeout=DEADLINE,
    )
    out["batch"] = [hits_view(q) for q in r.results]

    # Query repair: a misspelt query is repaired (the default, auto), and says so; off leaves it.
    r = stub.Search(
        pb.SearchRequest(queries=["symptoms of vitamin d deficeincy", "boil an egg"], k=3), timeout=DEADLINE
    )
    out["repair"] = {
        "repairs": [
            {
                "changed": q.changed,
                "text": q.text,
                "fusion": q.fusion,
                "edits": [{"from": getattr(e, "from"), "to": e.to, "kind": e.kind} for e in q.edits],
            }
            for q in r.repairs
        ],
        "repair_ms": r.timings.repair_ms,
    }
    r = stub.Search(
        pb.SearchRequest(queries=["symptoms of vitamin d deficeincy"], k=3, repair="off"), timeout=DEADLINE
    )
    out["repair_off_changed"] = [q.changed for q in r.repairs]
    stream = stub.SearchStream(
        iter([pb.SearchRequest(queries=["what is the capital of austrlia"], k=1, repair="on")]), timeout=DEADLINE
    )
    out["repair_stream"] = [resp.repairs[0].text for resp in stream]

    # Bidirectional stream: three requests, answered in order.
    stream_queries = [
        "how long do antibiotics take to work",
        "symptoms of vitamin d deficiency",
        "what is the capital of australia",
    ]
    requests = iter([pb.SearchRequest(queries=[q], k=2) for q in stream_queries])
    out["stream"] = [
        [h["id"] for h in hits_view(resp.results[0])]
        for resp in stub.SearchStream(requests, timeout=DEADLINE)
    ]

    # A stream whose second request is invalid: the first answer, then the stream's status.
    bad = iter([
        pb.SearchRequest(queries=["how long to boil an egg"], k=1),
        pb.SearchRequest(queries=[""], k=1),
        pb.SearchRequest(queries=["safe internal temperature for chicken"], k=1),
    ])
    got = []
    stream_err = error_of(lambda: [got.append(resp.results[0].hits[0].id) for resp in stub.SearchStream(bad, timeout=DEADLINE)])
    out["stream_error"] = {"answered": got, "error": stream_err}

    # Embeddings.
    r = stub.Embed(pb.EmbedRequest(texts=["hello world", "how long do antibiotics take to work"]), timeout=DEADLINE)
    out["embed"] = {
        "count": len(r.embeddings),
        "dims": [len(e.values) for e in r.embeddings],
        "norms": [math.sqrt(sum(x * x for x in e.values)) for e in r.embeddings],
        "encoder": r.encoder.name,
        "tokens": r.tokens,
    }

    # Info.
    r = stub.Info(pb.InfoRequest(), timeout=DEADLINE)
    out["info"] = {
        "version": r.version,
        "ready": r.ready,
        "documents": r.index.documents,
        "dimension": r.index.dimension,
        "metric": r.index.metric,
        "encoders": [{"name": e.name, "dimension": e.dimension, "role": e.role} for e in r.encoders],
        "aliases": dict(r.aliases),
        "max_k": r.limits.max_k,
    }

    # Reflection v1: list the services, then fetch the file that defines Retrieval.
    refl = refl_grpc.ServerReflectionStub(channel)
    listed = []
    for resp in refl.ServerReflectionInfo(iter([refl_pb.ServerReflectionRequest(list_services="")]), timeout=DEADLINE):
        listed.extend(s.name for s in resp.list_services_response.service)
    out["reflection_services"] = sorted(listed)
    files = []
    for resp in refl.ServerReflectionInfo(
        iter([refl_pb.ServerReflectionRequest(file_containing_symbol="capot.v1.Retrieval")]), timeout=DEADLINE
    ):
        from google.protobuf import descriptor_pb2

        for raw in resp.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
            methods = [m.name for s in fd.service for m in s.method]
            files.append({"name": fd.name, "package": fd.package, "methods": methods})
    out["reflection_file"] = files

    # Errors.
    out["errors"] = {
        "empty_query": error_of(lambda: stub.Search(pb.SearchRequest(queries=[""], k=3), timeout=DEADLINE)),
        "no_queries": error_of(lambda: stub.Search(pb.SearchRequest(queries=[], k=3), timeout=DEADLINE)),
        "unknown_encoder": error_of(
            lambda: stub.Search(pb.SearchRequest(queries=["eggs"], k=3, encoder="no-such-encoder"), timeout=DEADLINE)
        ),
        "k_zero": error_of(lambda: stub.Search(pb.SearchRequest(queries=["eggs"], k=0), timeout=DEADLINE)),
        "k_too_large": error_of(lambda: stub.Search(pb.SearchRequest(queries=["eggs"], k=1_000_000), timeout=DEADLINE)),
        "ef_zero": error_of(lambda: stub.Search(pb.SearchRequest(queries=["eggs"], k=3, ef=0), timeout=DEADLINE)),
        "repair_unknown": error_of(
            lambda: stub.Search(pb.SearchRequest(queries=["eggs"], k=3, repair="often"), timeout=DEADLINE)
        ),
        "embed_empty": error_of(lambda: stub.Embed(pb.EmbedRequest(texts=["  "]), timeout=DEADLINE)),
        "embed_wrong_dimensions": error_of(
            lambda: stub.Embed(pb.EmbedRequest(texts=["eggs"], dimensions=128), timeout=DEADLINE)
        ),
        "embed_unknown_encoder": error_of(
            lambda: stub.Embed(pb.EmbedRequest(texts=["eggs"], encoder="nope"), timeout=DEADLINE)
        ),
    }
    return out


def auth_mode(channel, pb, pb_grpc, health_pb, health_grpc, refl_pb, refl_grpc, key):
    stub = pb_grpc.RetrievalStub(channel)
    req = pb.SearchRequest(queries=["how long to boil an egg"], k=1)
    good = [("authorization", f"Bearer {key}")]
    out = {
        "search_without_key": error_of(lambda: stub.Search(req, timeout=DEADLINE)),
        "search_wrong_key": error_of(
            lambda: stub.Search(req, timeout=DEADLINE, metadata=[("authorization", "Bearer wrong")])
        ),
        "info_without_key": error_of(lambda: stub.Info(pb.InfoRequest(), timeout=DEADLINE)),
        "embed_without_key": error_of(lambda: stub.Embed(pb.EmbedRequest(texts=["eggs"]), timeout=DEADLINE)),
        "stream_without_key": error_of(lambda: list(stub.SearchStream(iter([req]), timeout=DEADLINE))),
        "search_with_key": error_of(lambda: stub.Search(req, timeout=DEADLINE, metadata=good)),
    }
    r = stub.Search(req, timeout=DEADLINE, metadata=good)
    out["search_with_key_top"] = r.results[0].hits[0].id
    # Health and reflection need no key.
    health = health_grpc.HealthStub(channel)
    out["health_without_key"] = health_pb.HealthCheckResponse.ServingStatus.Name(
        health.Check(health_pb.HealthCheckRequest(), timeout=DEADLINE).status
    )
    refl = refl_grpc.ServerReflectionStub(channel)
    listed = []
    for resp in refl.ServerReflectionInfo(iter([refl_pb.ServerReflectionRequest(list_services="")]), timeout=DEADLINE):
        listed.extend(s.name for s in resp.list_services_response.service)
    out["reflection_without_key"] = sorted(listed)
    return out


def hold_mode(channel, pb, pb_grpc):
    import queue

    stub = pb_grpc.RetrievalStub(channel)
    pending = queue.Queue()

    def requests():
        while True:
            item = pending.get()
            if item is None:
                return
            yield item

    pending.put(pb.SearchRequest(queries=["how long to boil an egg"], k=1))
    answers = []
    responses = stub.SearchStream(requests(), timeout=DEADLINE)

    def consume():
        for resp in responses:
            answers.append(resp.results[0].hits[0].id)
            print("answered", flush=True)

    err = error_of(consume)
    pending.put(None)
    return {"answered": answers, "error": err}


def fuzz_mode(channel, pb, pb_grpc, health_pb, health_grpc, cases):
    import random
    import time

    import grpc

    rng = random.Random(7)
    stub = pb_grpc.RetrievalStub(channel)
    raw = {
        name: channel.unary_unary(f"/capot.v1.Retrieval/{name}")
        for name in ("Search", "Embed", "Info")
    }
    raw_stream = channel.stream_stream("/capot.v1.Retrieval/SearchStream")
    codes = {"raw": {}, "typed": {}}
    internal_messages = set()

    def count(call, kind="typed"):
        try:
            call()
            code = "OK"
        except grpc.RpcError as e:
            code = code_name(e)
            if code in ("INTERNAL", "UNKNOWN"):
                internal_messages.add(e.details().split(":")[0])
        codes[kind][code] = codes[kind].get(code, 0) + 1

    def text():
        kind = rng.randrange(5)
        if kind == 0:
            return "".join(chr(rng.randrange(0, 32)) for _ in range(rng.randrange(0, 20)))
        if kind == 1:
            return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(0, 60)))
        if kind == 2:
            return rng.choice(["", " ", "\u200b", "a" * rng.randrange(1, 300_000)])
        if kind == 3:
            return "symptoms of vitamin d deficeincy"
        return "".join(rng.choice("abcdefghij ") for _ in range(rng.randrange(1, 40)))

    def optional_uint():
        return rng.choice([None, 0, 1, 5, 1000, 2**31, 2**32 - 1])

    started = time.monotonic()
    for _ in range(cases):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        kind = rng.randrange(6)
        if kind == 0:
            name = rng.choice(list(raw))
            count(lambda: raw[name](blob, timeout=DEADLINE), "raw")
        elif kind == 1:
            count(lambda: list(raw_stream(iter([blob, blob]), timeout=DEADLINE)), "raw")
        elif kind in (2, 3):
            req = pb.SearchRequest(
                queries=[text() for _ in range(rng.randrange(0, 4))],
                encoder=rng.choice(["", "default", "nope", "\x00", "a" * 1000]),
                repair=rng.choice(["", "off", "on", "auto", "sometimes"]),
                repair_fusion=rng.choice(["", "max", "repaired", "rrf"]),
            )
            for field in ("k", "ef"):
                v = optional_uint()
                if v is not None:
                    setattr(req, field, v)
            if kind == 2:
                count(lambda: stub.Search(req, timeout=DEADLINE))
            else:
                count(lambda: list(stub.SearchStream(iter([req, req]), timeout=DEADLINE)))
        else:
            req = pb.EmbedRequest(
                texts=[text() for _ in range(rng.randrange(0, 4))],
                encoder=rng.choice(["", "default", "nope"]),
            )
            v = optional_uint()
            if v is not None:
                req.dimensions = v
            count(lambda: stub.Embed(req, timeout=DEADLINE))
    seconds = time.monotonic() - started
    health = health_grpc.HealthStub(channel).Check(
        health_pb.HealthCheckRequest(service=""), timeout=DEADLINE
    )
    after = stub.Search(pb.SearchRequest(queries=["vitamin d"], k=3), timeout=DEADLINE)
    return {
        "cases": cases,
        "seconds": round(seconds, 2),
        "codes": codes,
        "internal_messages": sorted(internal_messages),
        "health_after": health_pb.HealthCheckResponse.ServingStatus.Name(health.status),
        "hits_after": len(after.results[0].hits),
    }


def search_mode(channel, pb, pb_grpc, requests_file):
    from google.protobuf.json_format import MessageToDict, ParseDict

    stub = pb_grpc.RetrievalStub(channel)
    with open(requests_file) as f:
        requests = json.load(f)
    answers = []
    for fields in requests:
        try:
            # ParseDict takes nested messages (a filter) as plain JSON.
            r = stub.Search(ParseDict(fields, pb.SearchRequest()), timeout=DEADLINE)
            answers.append(MessageToDict(r, preserving_proto_field_name=True))
        except grpc_error() as e:
            answers.append({"error": {"code": code_name(e), "message": e.details()}})
    return {"answers": answers}


def grpc_error():
    import grpc

    return grpc.RpcError


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target", required=True, help="HOST:PORT of capot's gRPC listener")
    ap.add_argument("--stubs", required=True, help="directory of the generated *_pb2 modules")
    ap.add_argument("--mode", choices=["main", "auth", "hold", "fuzz", "search"], default="main")
    ap.add_argument("--requests", help="JSON list of SearchRequest fields (mode search)")
    ap.add_argument("--cases", type=int, default=600)
    ap.add_argument("--api-key")
    args = ap.parse_args()

    sys.path.insert(0, args.stubs)
    import grpc
    from capot.v1 import retrieval_pb2 as pb
    from capot.v1 import retrieval_pb2_grpc as pb_grpc
    from grpc_std import health_pb2 as health_pb
    from grpc_std import health_pb2_grpc as health_grpc
    from grpc_std import reflection_pb2 as refl_pb
    from grpc_std import reflection_pb2_grpc as refl_grpc

    with grpc.insecure_channel(args.target) as channel:
        grpc.channel_ready_future(channel).result(timeout=DEADLINE)
        mods = (pb, pb_grpc, health_pb, health_grpc, refl_pb, refl_grpc)
        if args.mode == "main":
            out = main_mode(channel, *mods)
        elif args.mode == "hold":
            out = hold_mode(channel, pb, pb_grpc)
        elif args.mode == "search":
            out = search_mode(channel, pb, pb_grpc, args.requests)
        elif args.mode == "fuzz":
            out = fuzz_mode(channel, pb, pb_grpc, health_pb, health_grpc, args.cases)
        else:
            out = auth_mode(channel, *mods, args.api_key)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
