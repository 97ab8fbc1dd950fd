"""`durables bench`: durables side by side with raw redis-py and nats-py JetStream.

Each scenario runs three ways on servers this run starts for itself on loopback,
and is reported as ratios: durables vs the same Redis commands by hand (the
client-side ceiling), and vs JetStream durable pull consumers (what users would
pick instead). Scenarios live in `registry.SCENARIOS`.

A package of its own beside the library: a program on top of `durables` that the
library never imports. It ships in the same wheel as the command line that runs it
(`durables bench`); its peer, nats-py, is the `bench` extra.
"""

from __future__ import annotations

from .cli import main

__all__ = ["main"]
