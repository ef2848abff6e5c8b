#!/bin/bash
# s3rm-jobrunner-fresh MAX_AGE_SECONDS — container health check of the jobrunner service:
# exit 0 when the freshness state file reports ok:true no older than MAX_AGE_SECONDS
# (the same rule the gateway's /readyz applies, gateway/web/health.py jobrunner_status).
set -euo pipefail
state="${S3RM_JOBRUNNER_STATE_FILE:-/var/lib/s3rm/jobrunner/state.json}"
max_age="${1:-120}"
php -r '
	$d = json_decode(@file_get_contents($argv[1]), true);
	if (!is_array($d) || ($d["ok"] ?? null) !== true) { exit(1); }
	$t = strtotime($d["last_run_at"] ?? "");
	if ($t === false || time() - $t > (int)$argv[2]) { exit(1); }
' "$state" "$max_age"
