# Shared by the hack/ scripts: find the repo, and make sure .venv has the project installed.
# The venv is rebuilt only when pyproject.toml changes, so this costs nothing when warm.
KMC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KMC_VENV=${KMC_VENV:-$KMC_ROOT/.venv}

kmc_venv() {
  local stamp="$KMC_VENV/.kmc-installed"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$KMC_ROOT/pyproject.toml" ]; then
    return 0
  fi
  if ! command -v python3 >/dev/null; then
    echo "kubectl-mc needs python3 >= 3.11 on PATH" >&2
    return 1
  fi
  echo "setting up $KMC_VENV (python deps from PyPI)…" >&2
  [ -x "$KMC_VENV/bin/python" ] || python3 -m venv "$KMC_VENV" || return 1
  local log="$KMC_VENV/pip.log"
  if ! { "$KMC_VENV/bin/python" -m pip install --upgrade pip &&
         "$KMC_VENV/bin/python" -m pip install -e "$KMC_ROOT[dev]"; } >"$log" 2>&1; then
    tail -20 "$log" >&2
    echo "installing kubectl-mc's python dependencies failed (full log: $log)" >&2
    return 1
  fi
  touch "$stamp"
}
