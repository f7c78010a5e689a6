# syntax=docker/dockerfile:1.7
#
# capot container images (linux/amd64: the ONNX Runtime wheels fetched are x86-64 builds).
#
#   docker build -t capot:0.1.0 .                        CPU image (the default, last stage)
#   docker build -t capot:0.1.0-cuda --target cuda .     CUDA image (ONNX Runtime CUDA provider)
#
# Both images carry the default encoder bundle (/encoders/minilm) and the built-in corpus indexed
# at build time (/indexes/default-corpus), so `docker run -p 8080:8080 capot:0.1.0` serves at
# once. In Kubernetes the read-only models volume is mounted over /indexes and /encoders
# (deploy/, docs/operations.md). Linted by hadolint in tests/deploy_manifests.rs.

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
# onnxruntime-gpu 1.31.1 is built for CUDA 13 and cuDNN 9. Ubuntu 24.04 (glibc 2.39) because the
# binary is built on Debian bookworm (glibc 2.36): an older glibc (Ubuntu 22.04 has 2.35) may
# lack symbols it links against.
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-cudnn-runtime-ubuntu24.04

# ---------------------------------------------------------------------------------------------
# builder: the README's `scripts/setup` (pip download --require-hashes of the pinned assets,
# cargo build --release --locked, default encoder import), then the built-in corpus indexed.
FROM ${RUST_IMAGE} AS builder
# Versions are not pinned: the base image tag fixes the Debian release, whose point releases
# replace these packages' versions (a pinned version would stop resolving).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-pip protobuf-compiler \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ENV CARGO_TARGET_DIR=/cargo-target \
    CARGO_TERM_COLOR=never \
    ORT_DYLIB_PATH=/src/assets/onnxruntime/lib/libonnxruntime.so
# The cargo target directory is a build cache: the binary is copied out in the same step.
RUN --mount=type=cache,id=capot-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=capot-target,target=/cargo-target \
    scripts/setup \
 && install -D -m 0755 /cargo-target/release/capot /out/bin/capot \
 && install -D -m 0644 assets/onnxruntime/lib/libonnxruntime.so.1.31.1 /out/lib/libonnxruntime.so.1.31.1 \
 && ln -s libonnxruntime.so.1.31.1 /out/lib/libonnxruntime.so \
 && mkdir -p /out/encoders /out/indexes /out/lexicon \
 && cp -a assets/encoders/minilm /out/encoders/minilm \
 && cp -a assets/lexicon/. /out/lexicon/ \
 && /out/bin/capot index build --doc-encoder /out/encoders/minilm \
      --corpus data/default-corpus --out /out/indexes/default-corpus

# ---------------------------------------------------------------------------------------------
# cuda-builder: the same binary with the CUDA execution provider registered (`--features cuda`,
# nothing CUDA needed at build time) and the onnxruntime-gpu libraries (scripts/assets-gpu.txt).
FROM builder AS cuda-builder
RUN --mount=type=cache,id=capot-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=capot-target,target=/cargo-target \
    scripts/setup --gpu \
 && install -D -m 0755 /cargo-target/release/capot /out-cuda/bin/capot \
 && mkdir -p /out-cuda/lib \
 && cp -a assets/onnxruntime-gpu/lib/. /out-cuda/lib/

# ---------------------------------------------------------------------------------------------
# cuda: NVIDIA's CUDA 13 + cuDNN 9 runtime; `--device cuda` fails clearly when no GPU is visible
# (use `--device auto` to fall back to CPU).
FROM ${CUDA_IMAGE} AS cuda
# Versions are not pinned: the base image tag fixes the Ubuntu release (see builder).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 capot \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/capot --no-create-home capot \
 && mkdir -p /var/lib/capot /indexes /encoders \
 && chown 10001:10001 /var/lib/capot
COPY --from=cuda-builder /out-cuda/lib/ /opt/capot/lib/
COPY --from=cuda-builder /out-cuda/bin/capot /usr/local/bin/capot
COPY --from=builder /out/encoders/ /encoders/
COPY --from=builder /out/indexes/ /indexes/
COPY --from=builder /out/lexicon/ /opt/capot/lexicon/
ENV ORT_DYLIB_PATH=/opt/capot/lib/libonnxruntime.so \
    CAPOT_LEXICON=/opt/capot/lexicon/frequency_dictionary_en_82_765.txt,/opt/capot/lexicon/frequency_bigramdictionary_en_243_342.txt,/opt/capot/lexicon/wordfreq_large_en.txt,/opt/capot/lexicon/cmudict_homophones.txt \
    CAPOT_LOG=info \
    CAPOT_LOG_FORMAT=json
USER 10001:10001
WORKDIR /var/lib/capot
VOLUME ["/var/lib/capot", "/indexes", "/encoders"]
EXPOSE 8080 50051 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["curl", "-fsS", "--max-time", "2", "-o", "/dev/null", "http://127.0.0.1:8080/health"]
STOPSIGNAL SIGTERM
# tini is PID 1: it forwards SIGTERM to capot (which drains in-flight requests itself) and
# reaps the processes that local alignment jobs leave behind.
ENTRYPOINT ["/usr/bin/tini", "--", "capot"]
CMD ["serve", "--index", "/indexes/default-corpus", "--encoder", "/encoders/minilm", \
     "--addr", "0.0.0.0:8080", "--grpc-addr", "0.0.0.0:50051", "--admin-addr", "0.0.0.0:8081", \
     "--data-dir", "/var/lib/capot", "--device", "cuda"]

# ---------------------------------------------------------------------------------------------
# cpu (default): slim Debian, the ONNX Runtime CPU library, the binary, the default encoder and
# index. Non-root (uid 10001); the root filesystem can be mounted read-only (state goes to the
# /var/lib/capot volume).
FROM ${RUNTIME_IMAGE} AS cpu
# Versions are not pinned: the base image tag fixes the Debian release (see builder).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 capot \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/capot --no-create-home capot \
 && mkdir -p /var/lib/capot /indexes /encoders \
 && chown 10001:10001 /var/lib/capot
COPY --from=builder /out/lib/ /opt/capot/lib/
COPY --from=builder /out/bin/capot /usr/local/bin/capot
COPY --from=builder /out/encoders/ /encoders/
COPY --from=builder /out/indexes/ /indexes/
COPY --from=builder /out/lexicon/ /opt/capot/lexicon/
ENV ORT_DYLIB_PATH=/opt/capot/lib/libonnxruntime.so \
    CAPOT_LEXICON=/opt/capot/lexicon/frequency_dictionary_en_82_765.txt,/opt/capot/lexicon/frequency_bigramdictionary_en_243_342.txt,/opt/capot/lexicon/wordfreq_large_en.txt,/opt/capot/lexicon/cmudict_homophones.txt \
    CAPOT_LOG=info \
    CAPOT_LOG_FORMAT=json
USER 10001:10001
WORKDIR /var/lib/capot
VOLUME ["/var/lib/capot", "/indexes", "/encoders"]
EXPOSE 8080 50051 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["curl", "-fsS", "--max-time", "2", "-o", "/dev/null", "http://127.0.0.1:8080/health"]
STOPSIGNAL SIGTERM
# tini is PID 1: it forwards SIGTERM to capot (which drains in-flight requests itself) and
# reaps the processes that local alignment jobs leave behind.
ENTRYPOINT ["/usr/bin/tini", "--", "capot"]
CMD ["serve", "--index", "/indexes/default-corpus", "--encoder", "/encoders/minilm", \
     "--addr", "0.0.0.0:8080", "--grpc-addr", "0.0.0.0:50051", "--admin-addr", "0.0.0.0:8081", \
     "--data-dir", "/var/lib/capot"]
