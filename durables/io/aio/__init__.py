"""The asyncio twin of the I/O layer: the same operations, flows and retries as `io`,
awaited on redis-py's asyncio client and carried out by tasks instead of threads."""
