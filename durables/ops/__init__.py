"""Operations as plain data (no I/O): one module per area, one function per operation.

Each function returns an `Op` (or a list to send in one pipeline) with its parser;
the readers' state machines (`exclusive`, `shared`, `sessions`) say what to send
next and what a reply means. Executors (sync, asyncio) do the sending.
"""
