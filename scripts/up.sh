#!/usr/bin/env bash
# The one command that brings the whole development system up on loopback with
# real data: installs what is missing (Debian + Python packages), then runs
# `s3rm stack up` (dev wiki, sync push, corpus import, embedding server,
# gateway; returns once the wiki, the gateway and legacy search answer, showing
# the semantic index's progress; `scripts/up.sh --wait-semantic` also waits for
# hybrid search; prints the MCP URL and a client set-up line).
# Safe to run twice. Arguments are passed to `s3rm stack up`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=install.sh
source scripts/install.sh
started_ns="$(date +%s%N)"
install_debian_packages
install_python_package
# where the time goes: this step here; `s3rm stack up` prints the time of each of its own steps at the end
tenths=$(( ($(date +%s%N) - started_ns) / 100000000 ))
printf 'up.sh: packages checked in %d.%d s\n' $(( tenths / 10 )) $(( tenths % 10 ))
case " $* " in
  *" --wait-semantic "*) ;;
  *) echo "up.sh: returning once legacy search answers; pass --wait-semantic to wait for hybrid search too" ;;
esac
exec python -m s3rm stack up "$@"
