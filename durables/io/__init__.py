"""The I/O layer: the only code that talks to the server (the executor), how it reaches it
(transport, connections, a cluster's routing), how it rides through an outage (recovery),
and what owns the client's threads (runtime, leases). Its asyncio twin is `io.aio`."""
