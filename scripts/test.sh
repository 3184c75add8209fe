#!/usr/bin/env bash
# The whole test suite (README and CI run exactly this). pytest's exit code 5 ("no tests ran")
# is a failure here, as is any failed test.
set -uo pipefail
cd "$(dirname "$0")/.."
python -m pytest -q -p no:cacheprovider "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "no tests ran: failing" >&2; exit 1; fi
exit "$rc"
