#!/bin/sh
# Start llama-server for Qwen3-Embedding-0.6B (F16 GGUF) after re-checking the pinned SHA-256.
# Serves the OpenAI-compatible /v1/embeddings on :8080 of the internal embedding-backend
# network only (compose.yaml publishes no port). The served model id is the file name,
# which gateway/config/profiles.py (QWEN3_PROFILE.model_id) pins; last-token pooling;
# 2 slots x 16,384 tokens (the profile's max_input_tokens), one micro-batch per input.
set -eu
model="/models/${S3RM_MODEL_FILE:?}"
if [ ! -f "$model" ]; then
	echo "s3rm: $model is missing; the embedding-downloader service fetches it" >&2
	exit 1
fi
actual=$(sha256sum "$model" | cut -d' ' -f1)
if [ "$actual" != "${S3RM_MODEL_SHA256:?}" ]; then
	echo "s3rm: $model does not match the pinned SHA-256; refusing to serve it" >&2
	exit 1
fi
exec /app/llama-server \
	--model "$model" \
	--alias "${S3RM_MODEL_FILE}" \
	--embedding --pooling last \
	--host 0.0.0.0 --port 8080 \
	--n-gpu-layers "${S3RM_EMBEDDING_GPU_LAYERS:-99}" \
	--parallel "${S3RM_EMBEDDING_PARALLEL:-2}" \
	--ctx-size 32768 --batch-size 16384 --ubatch-size 16384
