#!/usr/bin/env bash
# The GPU acceptance check as one command, for a GPU machine with no package registry (issue 15):
#
#   bash tests/gpu/run.sh [--dry-run | --rehearse] [more options of python -m tests.gpu.check]
#
# 1. Installs, offline, the carried wheels this machine's Python lacks (build/wheels/deps/, from
#    `make gpu-deps`) and the CUDA llama-cpp-python wheel (build/wheels/cuda*/, from `make gpu-wheel`) into
#    a folder of their own, put first on PYTHONPATH. No venv: the machine's python3 may itself be a venv's
#    (the device image's is), and a venv made from it would not see that venv's torch.
# 2. Writes a `tailor` command there and runs python -m tests.gpu.check, all within GPU_CHECK_SECONDS
#    (480: the 8 minutes the issue allows; a timeout stops the check, whose report is written after every step).
#
# The report (report.txt, report.json, steps.log, and setup.log from here) goes to $OUT, else build/gpu-report.
# PYTHON (python3), TAILOR_GPU_SITE, TAILOR_GPU_DEPS and TAILOR_GPU_WHEEL choose other ones.
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=${GPU_CHECK_SECONDS:-480}
python=$(command -v "${PYTHON:-python3}") || { echo "no ${PYTHON:-python3} here" >&2; exit 2; }
out=${OUT:-build/gpu-report}
site=${TAILOR_GPU_SITE:-/tmp/tailor-gpu-site}
deps=${TAILOR_GPU_DEPS:-build/wheels/deps}
wheel=${TAILOR_GPU_WHEEL:-$(ls -t build/wheels/cuda*/llama_cpp_python-*.whl 2>/dev/null | head -n 1)}
mkdir -p "$out"
setup="$out/setup.log"

{
    echo "python: $python ($("$python" --version 2>&1)); deps: $deps; CUDA wheel: ${wheel:-none}"
    rm -rf "$site"
    mapfile -t missing < <("$python" -m tests.gpu.wheels --missing-here --deps "$deps")
    echo "installing ${#missing[@]} carried wheels this Python lacks: ${missing[*]##*/}"
    if ((${#missing[@]})) || [ -n "$wheel" ]; then
        "$python" -m pip install --quiet --no-index --no-deps --no-compile --disable-pip-version-check \
            --target "$site" "${missing[@]}" ${wheel:+"$wheel"}
    fi
} >"$setup" 2>&1 || echo "installing the wheels failed (see $setup); the check says what is missing"

mkdir -p "$site/bin"
# As pip writes console scripts: the engine's process (multiprocessing, spawn) imports this file again.
printf '#!%s\nimport sys\nfrom app.launcher import main\nif __name__ == "__main__":\n    sys.exit(main())\n' \
    "$python" >"$site/bin/tailor"
chmod +x "$site/bin/tailor"
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$site/bin:$PATH" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
echo "setup took $SECONDS s (log: $setup)"

left=$((limit - SECONDS))
if ((left < 60)); then left=60; fi  # slow installs still leave the check a minute to say so
timeout --kill-after=10 "$((left - 5))" "$python" -m tests.gpu.check --out "$out" --seconds "$((left - 15))" "$@"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "the check was stopped at the ${limit} s limit: $out/report.json holds the steps it finished"
fi
exit "$rc"
