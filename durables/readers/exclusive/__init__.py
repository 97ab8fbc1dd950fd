"""The exclusive durable's reader: its state machine (`cursor`) and its loop (`reader`)."""
