# Sourced by the pack scripts (make_pack.sh, make_checks_pack.sh): the repository root as working directory,
# .gpupack*/ ignored by git, and PY (the venv's python), SITE (its site-packages), MODEL (MiniLM's folder).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.gpupack\*/' .git/info/exclude 2>/dev/null || echo '/.gpupack*/' >> .git/info/exclude
PY=${PY:-.venv/bin/python}
SITE=$($PY -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
MODEL=$($PY -c "from talos_core.models.text import minilm_path; print(minilm_path())")
