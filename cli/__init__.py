"""The `durables` admin command line (installed as the package `durables_cli`).

It parses and presents; every decision is the library's. Modules inside use
relative imports only, because this directory is installed under another name.
"""
