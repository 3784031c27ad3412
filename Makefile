# The two entry points the README promises. Both set up .venv first (idempotent).
.PHONY: setup test demo
setup:
	bash scripts/setup.sh
test: setup
	.venv/bin/python -m pytest -q test
demo: setup
	.venv/bin/python -m string_perception.demo
