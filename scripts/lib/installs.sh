# What the test steps beyond Rust install, in one place (sourced, from the
# repository's root): one venv under target/venv shared by every Python
# check, the packages each check needs, and Debian's Chromium for the
# console's browser test. Every function installs only what is missing, so
# a second call (a later step, a second run) needs no network.
#
#   venv_ready                 target/venv exists ($venv, $py set)
#   venv_install REQ…          pip-installs REQ… into it
#   python_client_deps         pytest, and setuptools that builds a wheel
#   deploy_deps                the pinned schema checker and PyYAML
#   browser_deps [REQ…]        chromium, chromedriver, Selenium and REQ…
#   go_deps                    Debian's Go (the Go client's tests)
#
# scripts/test.sh runs all of them in the background while the build runs
# (scripts/install-test-deps.sh), so the later steps find them present.

export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the work tree
venv=target/venv
py=$venv/bin/python

venv_ready() {
    local python=${PYTHON:-python3}
    [ -x "$py" ] && return 0
    mkdir -p target
    # No pip of its own (ensurepip alone takes ~12 s): the outer pip
    # installs into it (pip 22.3 and later: --python), else ensurepip.
    if ! "$python" -m venv --without-pip "$venv"; then
        rm -rf "$venv"
        # Debian's own python3 keeps venv in a package of its own.
        if command -v apt-get >/dev/null 2>&1; then
            as_root apt-get update -qq && as_root apt-get install -y -qq python3-venv
        fi
        "$python" -m venv --without-pip "$venv"
    fi
}

venv_install() {
    venv_ready
    local python=${PYTHON:-python3}
    if ! "$py" -m pip --version >/dev/null 2>&1; then
        if "$python" -m pip --python "$py" install --quiet --disable-pip-version-check "$@"; then
            return 0
        fi
        "$py" -m ensurepip --default-pip >/dev/null
    fi
    "$py" -m pip install --quiet --disable-pip-version-check "$@"
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# pytest, and the build backend of the client: setuptools that can build a
# wheel by itself (70.1 and later; a venv of Python 3.11 has an older one,
# 3.12's none). One pip run for both, only for what is missing.
python_client_deps() {
    venv_ready
    local missing=()
    "$py" -c 'import pytest' 2>/dev/null || missing+=(pytest)
    "$py" -c 'import xdist' 2>/dev/null || missing+=('pytest-xdist>=3.5,<4')
    "$py" -c 'import setuptools.command.bdist_wheel' 2>/dev/null || missing+=('setuptools>=70.1')
    if [ ${#missing[@]} -gt 0 ]; then
        venv_install "${missing[@]}"
    fi
}

# Pinned: the Kubernetes schemas the manifests are checked against come
# with the package.
deploy_deps() {
    venv_ready
    if ! "$py" -c 'import yaml, kubernetes_validate.version as v; assert v.__version__ == "1.37.0"' 2>/dev/null; then
        echo "installing kubernetes-validate==1.37.0 PyYAML==6.0.4 into $venv"
        venv_install kubernetes-validate==1.37.0 PyYAML==6.0.4
    fi
}

browser_deps() {
    local missing=()
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing ${missing[*]} with apt"
        as_root apt-get update -qq
        # Without the recommended packages (fonts, audio, udev, …): a
        # headless test needs none of them, and they doubled what a fresh
        # machine unpacked beside the build (docs/testing.md, "CI time").
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "${missing[@]}" >/dev/null
    fi
    venv_ready
    if ! "$py" -c 'import selenium, pytest' 2>/dev/null || [ $# -gt 0 ]; then
        venv_install "selenium>=4.11,<5" "pytest>=7" "$@"
    fi
}

# Debian's Go: the Go client uses its standard library only, so the
# toolchain is all it needs (no module proxy).
go_deps() {
    command -v go >/dev/null 2>&1 && return 0
    echo "installing golang-go with apt"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends golang-go >/dev/null
}
