#!/usr/bin/env bash
# Called by `scripts/install.sh --test`. Programs the cluster tests need (tests/servers.py starts and stops the servers itself, on
# 127.0.0.1): PostgreSQL's server binaries (Debian's "postgresql" package) and `ss`
# (iproute2), which tells what the servers listen on; Debian's "chromium", the headless browser
# of tests/analysis/test_browser.py (Playwright drives it; it never downloads a browser).
# Installs what is missing; starts
# nothing, and keeps Debian's package from creating and starting its default cluster.
set -euo pipefail

missing=()
command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null \
  || missing+=(postgresql)
command -v ss >/dev/null 2>&1 || missing+=(iproute2)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if ((${#missing[@]} == 0)); then
  echo "services: PostgreSQL, ss and Chromium present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi
echo "services: installing ${missing[*]}"
"${sudo[@]}" mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" \
  | "${sudo[@]}" tee /etc/postgresql-common/createcluster.d/ortho-ci.conf >/dev/null
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
