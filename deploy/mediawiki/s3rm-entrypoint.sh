#!/bin/bash
# s3rm-entrypoint web|jobrunner|<command> — the S3RM MediaWiki container (docs/operations.md#what-runs).
#
# web:        wait for MariaDB; on an empty database run maintenance/install.php once; link
#             /opt/s3rm/LocalSettings.php (settings from environment); run update.php (core,
#             SMW and Page Forms tables; idempotent); provision the bot-password accounts;
#             then exec apache2-foreground.
# jobrunner:  wait until the web container has installed the wiki, then loop
#             maintenance/runJobs.php and after every run write the freshness state file
#             $S3RM_JOBRUNNER_STATE_FILE = {"last_run_at": "<UTC ISO-8601>Z", "ok": bool,
#             "exit_code": int, "duration_s": n} atomically (read by the gateway's /readyz).
# Secrets come from the environment and are never printed.
set -euo pipefail

MW=/var/www/html
LINK="$MW/LocalSettings.php"
STATE_FILE="${S3RM_JOBRUNNER_STATE_FILE:-/var/lib/s3rm/jobrunner/state.json}"

log() { printf '%s s3rm: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }

db_query() {
	# db_query SQL → prints the first column of the result (no headers)
	php -r '
		$m = @new mysqli(getenv("MW_DB_HOST") ?: "mariadb", getenv("MW_DB_USER"), getenv("MW_DB_PASSWORD"), getenv("MW_DB_NAME"));
		if ($m->connect_errno) { exit(2); }
		$r = $m->query($argv[1]);
		if ($r === false) { exit(3); }
		if ($r instanceof mysqli_result) { while ($row = $r->fetch_row()) { echo $row[0], "\n"; } }
	' "$1"
}

wait_for_db() {
	for _ in $(seq 1 120); do
		if db_query "SELECT 1" >/dev/null 2>&1; then return 0; fi
		sleep 2
	done
	log "MariaDB did not answer within 240 s"; exit 1
}

installed() { [ "$(db_query "SHOW TABLES LIKE 'page'" 2>/dev/null)" = "page" ]; }

link_settings() {
	printf '<?php\nrequire_once "/opt/s3rm/LocalSettings.php";\n' > "$LINK"
}

install_wiki() {
	log "empty database: running install.php"
	rm -f "$LINK"
	php "$MW/maintenance/install.php" \
		--dbtype mysql --dbserver "${MW_DB_HOST:-mariadb}" --dbname "$MW_DB_NAME" \
		--dbuser "$MW_DB_USER" --dbpass "$MW_DB_PASSWORD" \
		--installdbuser "$MW_DB_USER" --installdbpass "$MW_DB_PASSWORD" \
		--server "$MW_SERVER_URL" --scriptpath "" --lang ko \
		--pass "$MW_ADMIN_PASSWORD" --confpath /tmp \
		"${MW_SITE_NAME:-S3 연구 메모리}" S3Admin >/dev/null
	rm -f /tmp/LocalSettings.php
}

# role user app_id groups grants password_var
ACCOUNTS=(
	"sync S3Admin sync sysop,bureaucrat,interface-admin basic,highvolume,editpage,createeditmovepage,editinterface,editsiteconfig S3RM_BOT_SYNC_PASSWORD"
	"agent S3Agent gateway - basic,highvolume,editpage,createeditmovepage S3RM_BOT_AGENT_PASSWORD"
	"import S3Import import - basic,highvolume,editpage,createeditmovepage S3RM_BOT_IMPORT_PASSWORD"
)

provision_accounts() {
	# Idempotent: users are created (or their groups re-added); each bot password is recreated
	# from the environment, so rotating it is "change .env, recreate mediawiki".
	for spec in "${ACCOUNTS[@]}"; do
		read -r role user app groups grants var <<<"$spec"
		local bot_pw="${!var:?$var is required}"
		if [ "${#bot_pw}" -lt 32 ]; then log "$var must be at least 32 characters"; exit 1; fi
		local role_args=()
		if [ "$groups" != "-" ]; then
			# createAndPromote.php flags: --sysop --bureaucrat --interface-admin
			IFS=, read -ra gs <<<"$groups"; for g in "${gs[@]}"; do role_args+=("--$g"); done
		fi
		local user_pw
		if [ "$user" = "S3Admin" ]; then user_pw="$MW_ADMIN_PASSWORD"; else user_pw="$(head -c 24 /dev/urandom | base64)"; fi
		php "$MW/maintenance/run.php" createAndPromote --force "${role_args[@]}" "$user" "$user_pw" >/dev/null
		db_query "DELETE bp FROM bot_passwords bp JOIN user u ON u.user_id = bp.bp_user WHERE u.user_name = '$user' AND bp.bp_app_id = '$app'" >/dev/null
		php "$MW/maintenance/run.php" createBotPassword --appid "$app" --grants "$grants" "$user" "$bot_pw" >/dev/null
		log "bot password $user@$app provisioned ($role)"
	done
}

write_state() {
	# write_state ok exit_code duration
	local dir tmp
	dir="$(dirname "$STATE_FILE")"; mkdir -p "$dir"
	tmp="$dir/.state.json.tmp"
	printf '{"last_run_at": "%s", "ok": %s, "exit_code": %s, "duration_s": %s}\n' \
		"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" "$2" "$3" > "$tmp"
	mv -f "$tmp" "$STATE_FILE"
}

run_jobrunner() {
	local interval="${S3RM_JOBRUNNER_INTERVAL_SECONDS:-5}"
	trap 'log "job runner stopping"; exit 0' TERM INT
	until installed; do log "waiting for the wiki to be installed"; sleep 5; done
	link_settings
	log "job runner started (interval ${interval} s)"
	while true; do
		local start end rc
		start=$(date +%s.%N)
		if php "$MW/maintenance/run.php" runJobs --maxtime 60 --memory-limit 256M >/dev/null 2>/tmp/runjobs.err; then rc=0; else rc=$?; fi
		end=$(date +%s.%N)
		if [ "$rc" -eq 0 ]; then
			write_state true 0 "$(awk "BEGIN{printf \"%.3f\", $end-$start}")"
		else
			log "runJobs failed (exit $rc)"; tail -n 5 /tmp/runjobs.err >&2 || true
			write_state false "$rc" "$(awk "BEGIN{printf \"%.3f\", $end-$start}")"
		fi
		sleep "$interval" & wait $!
	done
}

# tests source this file for its functions only (tests/deploy/test_compose.py)
if [ "${S3RM_ENTRYPOINT_SOURCE_ONLY:-0}" = "1" ]; then return 0 2>/dev/null || exit 0; fi

case "${1:-web}" in
	web)
		wait_for_db
		if ! installed; then install_wiki; fi
		link_settings
		php "$MW/maintenance/run.php" update --quick >/dev/null
		provision_accounts
		chown -R www-data:www-data "$MW/images"
		log "wiki ready; starting Apache"
		exec apache2-foreground
		;;
	jobrunner)
		wait_for_db
		run_jobrunner
		;;
	*)
		exec "$@"
		;;
esac
