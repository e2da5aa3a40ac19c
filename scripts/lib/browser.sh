# Shared by scripts/test-console.sh and scripts/console-screenshot.sh
# (sourced, from the repository's root): a built lockd, Debian's chromium
# and its driver, and Selenium and pytest in target/venv, each installed
# when missing (scripts/lib/installs.sh). Sets $venv.
. scripts/lib/installs.sh

browser_setup() {
    local lockd=${LOCKD_BIN:-target/release/lockd}
    if [ ! -x "$lockd" ]; then
        echo "$lockd is missing: run cargo build --release first (or set LOCKD_BIN)" >&2
        exit 1
    fi
    browser_deps "$@"
}
