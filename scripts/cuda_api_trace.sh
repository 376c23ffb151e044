#!/usr/bin/env bash
# The old name of scripts/cupti_tools.sh (which builds libcuda_api_trace.so and more into DIR).
set -euo pipefail
exec "$(dirname "$0")/cupti_tools.sh" "$@"
