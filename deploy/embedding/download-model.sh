#!/bin/sh
# embedding-downloader: fetch the pinned Qwen3-Embedding-0.6B F16 GGUF into /models once.
#
# Pin (also in gateway/config/profiles.py QWEN3_PROFILE): file Qwen3-Embedding-0.6B-f16.gguf
# from the Qwen/Qwen3-Embedding-0.6B-GGUF repository, 1,197,629,632 bytes, SHA-256
# 421a27e58d165478cc7acb984a688c2aa41404968b0203e7cd743ece44c54340.
# Idempotent: an existing file with the right digest is kept; a wrong or partial file is
# never moved into place. Exit 0 only when /models holds the verified file.
set -eu
dest="${S3RM_MODELS_DIR:-/models}/${S3RM_MODEL_FILE:?}"
want="${S3RM_MODEL_SHA256:?}"
check() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$want" ]; }
if check "$dest"; then
	echo "s3rm: $dest already verified"
	exit 0
fi
part="$dest.part"
echo "s3rm: downloading ${S3RM_MODEL_FILE}"
curl -fL --retry 5 --retry-delay 5 --continue-at - -o "$part" "${S3RM_MODEL_URL:?}"
if [ -n "${S3RM_MODEL_BYTES:-}" ] && [ "$(wc -c < "$part" | tr -d ' ')" != "$S3RM_MODEL_BYTES" ]; then
	echo "s3rm: size mismatch for $part; deleting it" >&2
	rm -f "$part"
	exit 1
fi
if ! check "$part"; then
	echo "s3rm: SHA-256 mismatch for $part; deleting it" >&2
	rm -f "$part"
	exit 1
fi
mv -f "$part" "$dest"
chmod 0444 "$dest"
echo "s3rm: $dest verified"
