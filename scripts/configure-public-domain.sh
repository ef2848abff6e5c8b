#!/usr/bin/env bash
# configure-public-domain.sh DOMAIN --expected-ip IP [--env-file PATH] [--dry-run]
#
# Puts the compose stack behind Caddy on a public domain
# (docs/operations.md#public-domain):
#   1. checks that DOMAIN resolves to IP (refuses otherwise: Caddy's ACME challenge and
#      every client would go elsewhere);
#   2. writes these keys into the env file (default: .env next to compose.yaml), keeping
#      every other line and any extra allowlist entries already there:
#        S3RM_PUBLIC_DOMAIN=DOMAIN
#        S3RM_MCP_PUBLIC_URL=https://DOMAIN/mcp        (HTTPS required)
#        MW_SERVER_URL=https://DOMAIN                   (canonical wiki links, HTTPS)
#        S3RM_MCP_ALLOWED_HOSTS  += DOMAIN              (exact, no wildcards)
#        S3RM_MCP_ALLOWED_ORIGINS += https://DOMAIN
#        S3RM_MCP_BIND=127.0.0.1                        (gateway host port on loopback only)
#        S3RM_WIKI_BIND=127.0.0.1                       (unless already set, e.g. for a direct entry)
#        S3RM_PROXY_SECRET=<random>                     (kept when already set)
#        COMPOSE_PROFILES += domain                     (starts Caddy on 80/443)
#   3. prints what it changed. Running it twice changes nothing the second time.
#
# --dry-run prints the resulting changes and writes nothing.
# Resolution uses `getent ahosts`; S3RM_RESOLVER=/path/to/cmd replaces it (the command gets
# DOMAIN as its argument and prints one address per line) — tests use a stub.
# Exit codes: 0 done, 1 the domain does not resolve to IP, 2 usage error.
set -euo pipefail

usage() {
	sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

die() { echo "configure-public-domain: $1" >&2; exit "${2:-2}"; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
domain=""
expected_ip=""
env_file="$here/.env"
dry_run=0

while [ $# -gt 0 ]; do
	case "$1" in
		--expected-ip) [ $# -ge 2 ] || usage; expected_ip="$2"; shift 2 ;;
		--expected-ip=*) expected_ip="${1#*=}"; shift ;;
		--env-file) [ $# -ge 2 ] || usage; env_file="$2"; shift 2 ;;
		--env-file=*) env_file="${1#*=}"; shift ;;
		--dry-run) dry_run=1; shift ;;
		-h|--help) usage ;;
		-*) die "unknown option $1" ;;
		*) [ -z "$domain" ] || die "only one DOMAIN may be given"; domain="$1"; shift ;;
	esac
done

[ -n "$domain" ] && [ -n "$expected_ip" ] || usage
domain="$(printf '%s' "$domain" | tr 'A-Z' 'a-z')"
domain="${domain%.}"
if ! [[ "$domain" =~ ^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$ ]]; then
	die "DOMAIN must be a DNS name such as s3wiki.example.org (no scheme, port, path or wildcard)"
fi
if ! [[ "$expected_ip" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ || "$expected_ip" =~ ^[0-9a-fA-F:]+$ ]]; then
	die "--expected-ip must be an IPv4 or IPv6 address"
fi

# ------------------------------------------------------------- 1. resolve
if [ -n "${S3RM_RESOLVER:-}" ]; then
	resolved="$("$S3RM_RESOLVER" "$domain" 2>/dev/null || true)"
else
	resolved="$(getent ahosts "$domain" 2>/dev/null | awk '{print $1}' || true)"
fi
resolved="$(printf '%s\n' "$resolved" | awk 'NF {print tolower($1)}' | sort -u)"
want="$(printf '%s' "$expected_ip" | tr 'A-Z' 'a-z')"
if ! printf '%s\n' "$resolved" | grep -qxF "$want"; then
	shown="$(printf '%s' "$resolved" | tr '\n' ' ')"
	die "$domain resolves to [${shown% }], not $expected_ip; fix the DNS record first" 1
fi
echo "configure-public-domain: $domain resolves to $expected_ip"

# ------------------------------------------------------------ 2. env file
current=""
[ -f "$env_file" ] && current="$(cat "$env_file")"

get_key() {  # get_key KEY → value of the last KEY= line ("" when absent)
	printf '%s\n' "$current" | awk -v k="$1" 'index($0, k "=") == 1 {v = substr($0, length(k) + 2)} END {print v}'
}

merge_list() {  # merge_list "a,b" "c" → "a,b,c" (exact items, no duplicates, order kept)
	printf '%s' "$1,$2" | awk -v RS=, '{gsub(/^[ \t]+|[ \t\n]+$/, "")} NF && !seen[$0]++ {out = out (out ? "," : "") $0} END {print out}'
}

secret="$(get_key S3RM_PROXY_SECRET)"
if [ -z "$secret" ]; then
	secret="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
fi
wiki_bind="$(get_key S3RM_WIKI_BIND)"
[ -n "$wiki_bind" ] || wiki_bind="127.0.0.1"

declare -a keys=(
	S3RM_PUBLIC_DOMAIN S3RM_MCP_PUBLIC_URL MW_SERVER_URL S3RM_MCP_ALLOWED_HOSTS S3RM_MCP_ALLOWED_ORIGINS
	S3RM_MCP_BIND S3RM_WIKI_BIND S3RM_PROXY_SECRET COMPOSE_PROFILES
)
declare -A values=(
	[S3RM_PUBLIC_DOMAIN]="$domain"
	[S3RM_MCP_PUBLIC_URL]="https://$domain/mcp"
	[MW_SERVER_URL]="https://$domain"
	[S3RM_MCP_ALLOWED_HOSTS]="$(merge_list "$(get_key S3RM_MCP_ALLOWED_HOSTS)" "$domain")"
	[S3RM_MCP_ALLOWED_ORIGINS]="$(merge_list "$(get_key S3RM_MCP_ALLOWED_ORIGINS)" "https://$domain")"
	[S3RM_MCP_BIND]="127.0.0.1"
	[S3RM_WIKI_BIND]="$wiki_bind"
	[S3RM_PROXY_SECRET]="$secret"
	[COMPOSE_PROFILES]="$(merge_list "$(get_key COMPOSE_PROFILES)" "domain")"
)

new="$current"
changed=()
for key in "${keys[@]}"; do
	value="${values[$key]}"
	old="$(get_key "$key")"
	if printf '%s\n' "$current" | grep -q "^$key="; then
		[ "$old" = "$value" ] && continue
		new="$(printf '%s\n' "$new" | awk -v k="$key" -v v="$value" 'index($0, k "=") == 1 {print k "=" v; next} {print}')"
	else
		new="$(printf '%s\n%s=%s' "$new" "$key" "$value")"
	fi
	changed+=("$key")
done
new="$(printf '%s\n' "$new" | sed '/./,$!d')"  # no leading blank lines

if [ "${#changed[@]}" -eq 0 ]; then
	echo "configure-public-domain: $env_file already configured for $domain; nothing to change"
	exit 0
fi
for key in "${changed[@]}"; do
	if [ "$key" = "S3RM_PROXY_SECRET" ]; then
		echo "  set $key=<new random secret>"
	else
		echo "  set $key=${values[$key]}"
	fi
done
if [ "$dry_run" -eq 1 ]; then
	echo "configure-public-domain: --dry-run: $env_file not written"
	exit 0
fi
umask 077
tmp="$(mktemp "$(dirname "$env_file")/.env.XXXXXX")"
printf '%s\n' "$new" > "$tmp"
chmod 600 "$tmp"
mv -f "$tmp" "$env_file"
echo "configure-public-domain: wrote $env_file; now run: docker compose up -d"
