# The two commands a newcomer needs (each does all set-up first):
#   make serve   - run the MCP server on embedded defaults (HTTP on 127.0.0.1:8765)
#   make test    - run the test suite
.PHONY: setup serve test
setup:
	@bash scripts/setup.sh
serve: setup
	@skill-server serve --transport http
test: setup
	@python3 -m pytest -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5): that is a failure here" >&2; fi; \
	exit $$rc
