#!/usr/bin/env bash
# Shared installer (sourced by .ci/run and scripts/up.sh): Debian packages and
# the Python package with its test extras. Safe to run again: it only installs
# what is missing. Needs root for apt-get on a fresh machine.

# Debian packages CI needs. Add yours here (one list, installed in one go).
DEBIAN_PACKAGES="mediawiki php-cli php-sqlite3 php-intl php-mbstring php-xml chromium chromium-driver"

install_debian_packages() {
  local wanted=(${DEBIAN_PACKAGES}) missing=() p
  command -v python >/dev/null 2>&1 || wanted+=(python-is-python3)
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
