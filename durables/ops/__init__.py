"""Operations as plain data (no I/O): one module per area, one function per operation.

Each function returns an `Op` (or a list to send in one pipeline) with its parser;
the session's state machine (`sessions`) says what to send next and what a reply means,
as the consumers' do beside their readers (`durables.readers`, at this layer too).
Executors (sync, asyncio) do the sending.
"""
