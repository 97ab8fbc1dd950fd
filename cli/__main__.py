"""`python -m durables_cli` runs the `durables` command."""

from __future__ import annotations

from .main import main

main()
