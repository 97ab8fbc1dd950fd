"""The readers: one attached consumer's side of the server, one home per durable kind.

`base.Reader` is the one interface both clients' consumers use (flows to drive, state
changes that return what to send); `fetching.Fetching` is what the consumers share on top
of it (the fetch loop, what they handed out). Each kind has its state machine (pure, layer
2: what to send next, what a reply means) beside the reader that drives it (layer 4):
`exclusive.cursor` and `exclusive.reader`; `shared.handout` and `shared.reader`, for shared
and serial durables, which share the Lua dispatcher.
"""
