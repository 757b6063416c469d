# The two commands a newcomer needs (each does all set-up first):
#   make serve   - run the MCP server on embedded defaults (stdio; see README for HTTP)
#   make test    - run the test suite
.PHONY: setup serve test
setup:
	@bash scripts/setup.sh
serve: setup
	@skill-server serve
test: setup
	@python3 -m pytest -q
