"""The embedded server: a valkey-server process durables starts on demand (`embedded`), its
config and port (`config`), and handling processes outside our own tree (`processes`)."""
