# Shared by scripts/test-console.sh and scripts/console-screenshot.sh
# (sourced, from the repository's root): Debian's chromium and its driver,
# installed with apt when missing, and a venv under target/venv with
# Selenium and whatever else is named: browser_setup [PIP_REQUIREMENT…].
browser_setup() {
    local lockd=${LOCKD_BIN:-target/release/lockd}
    if [ ! -x "$lockd" ]; then
        echo "$lockd is missing: run cargo build --release first (or set LOCKD_BIN)" >&2
        exit 1
    fi
    local missing=()
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
    if [ ${#missing[@]} -gt 0 ]; then
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo=sudo
        echo "installing ${missing[*]} with apt"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the work tree
    venv=target/venv
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    local pip
    if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
        pip=("$venv/bin/python" -m pip)
    else
        # A venv made --without-pip (by another script): pip from outside installs into it.
        pip=(python3 -m pip --python "$venv/bin/python")
    fi
    "${pip[@]}" install -q --disable-pip-version-check "selenium>=4.11,<5" "$@"
}
