"""Settings: keyword arguments over DURABLES_* variables over durables.toml, checked."""

from __future__ import annotations

from pathlib import Path

import pytest

import durables
import durables.aio
from durables import ConfigError
from durables.settings import load_settings


def test_settings_come_from_keywords_then_environment_then_durables_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "durables.toml").write_text(
        'namespace = "from-toml"\nread_batch = 7\nurl = "redis://127.0.0.1:1/0"\n'
    )
    assert load_settings().namespace == "from-toml" and load_settings().read_batch == 7
    monkeypatch.setenv("DURABLES_NAMESPACE", "from-env")
    monkeypatch.setenv("DURABLES_LEASE_TIMEOUT_S", "2.5")
    settings = load_settings()
    assert settings.namespace == "from-env" and settings.lease_timeout_s == 2.5
    assert settings.read_batch == 7 and settings.url == "redis://127.0.0.1:1/0"
    assert load_settings(namespace="from-kwargs").namespace == "from-kwargs"


def test_a_bad_value_in_the_environment_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DURABLES_READ_BATCH", "lots")
    with pytest.raises(ConfigError, match="read_batch"):
        load_settings()


def test_home_expands_the_user_directory() -> None:
    assert "~" not in str(load_settings(home="~/x").home_dir)


def test_a_lease_shorter_than_a_blocked_read_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"lease_timeout_s \(0\.5\) must be at least block_s"):
        load_settings(lease_timeout_s=0.5, block_s=1.0)
    assert load_settings(lease_timeout_s=1.0, block_s=1.0).lease_timeout_s == 1.0  # equal: fine


@pytest.mark.parametrize("client", [durables.Client, durables.aio.AsyncClient])
def test_a_client_given_a_url_instead_of_settings_says_to_connect(client: type) -> None:
    with pytest.raises(ConfigError, match=r"connect\(url") as raised:
        client("redis://user:secret@127.0.0.1:6379/0")
    assert "secret" not in str(raised.value)  # a URL may carry a password


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"block_s": 5.0, "socket_timeout_s": 2.0}, "socket_timeout_s (2) must exceed block_s (5)"),
        ({"url": "ftp://nowhere"}, "url: "),
    ],
)
def test_a_setting_refused_by_our_check_reads_as_we_wrote_it(
    given: dict[str, object], said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(**given)
    assert said in str(caught.value)
    assert "Value error" not in str(caught.value)
