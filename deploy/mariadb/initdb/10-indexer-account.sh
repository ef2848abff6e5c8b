#!/bin/bash
# Creates the read-only indexer account on the first start of an empty data volume
# (docker-entrypoint-initdb.d; docs/operations.md#mariadb:
# the indexer account gets only what reading Lessons needs: SELECT on the wiki database).
# Skipped when S3RM_INDEXER_DB_PASSWORD is empty. The password is never echoed.
set -euo pipefail
if [ -z "${S3RM_INDEXER_DB_PASSWORD:-}" ]; then
	echo "s3rm: S3RM_INDEXER_DB_PASSWORD is empty; no indexer account created"
	exit 0
fi
user="${S3RM_INDEXER_DB_USER:-s3rm_indexer}"
db="${MARIADB_DATABASE:?}"
case "$user$db" in *[!A-Za-z0-9_]*) echo "s3rm: indexer user and database names must be [A-Za-z0-9_]" >&2; exit 1;; esac
pw_sql=$(printf "%s" "$S3RM_INDEXER_DB_PASSWORD" | sed "s/'/''/g; s/\\\\/\\\\\\\\/g")
mariadb --protocol=socket -uroot -p"${MARIADB_ROOT_PASSWORD:?}" <<SQL
CREATE USER IF NOT EXISTS '${user}'@'%' IDENTIFIED BY '${pw_sql}';
GRANT SELECT ON \`${db}\`.* TO '${user}'@'%';
FLUSH PRIVILEGES;
SQL
echo "s3rm: read-only indexer account ${user} created (SELECT on ${db})"
