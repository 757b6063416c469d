# The two commands a newcomer needs (each does all set-up first):
#   make serve   - run the MCP server on embedded defaults (HTTP on 127.0.0.1:8765)
#   make test    - run the test suite (two pytest-xdist workers: tests/conftest.py says what
#                  runs on one worker and what runs alone)
#   make wheel   - build the installable wheel into dist/ (cards and kernels embedded)
# Everything runs from the project's virtual environment (.venv, made by setup).
VENV := .venv/bin
.PHONY: setup serve test wheel
setup:
	@bash scripts/setup.sh
serve: setup
	@$(VENV)/skill-server serve --transport http
test: setup
	@$(VENV)/python -m pytest -q --durations=30 -n 2 --dist loadgroup --no-loadscope-reorder; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5): that is a failure here" >&2; fi; \
	exit $$rc
wheel:
	@$(VENV)/python -m pip wheel . --no-deps -q -w dist && ls dist/*.whl
