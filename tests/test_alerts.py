"""The alert rules shipped beside the Grafana dashboard: Prometheus' own `promtool`
accepts them, they use only metrics durables exposes, and the main ones fire."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from .cli_support import Cli

RULES = Path(__file__).resolve().parent.parent / "docs" / "prometheus-alerts.yml"


def promtool_or_skip() -> str:
    """`promtool`; skipped where it is not installed, but CI must have it."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI") == "true":
            raise AssertionError("CI needs promtool (apt-get install prometheus)")
        pytest.skip("no promtool: apt-get install prometheus")
    return found


def test_promtool_accepts_the_shipped_rules() -> None:
    done = subprocess.run(
        [promtool_or_skip(), "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout


def test_the_rules_use_only_metrics_that_durables_exposes(cli: Cli) -> None:
    exposed = set(re.findall(r"^# TYPE (durables_\w+) ", cli.ok("metrics"), re.MULTILINE))
    exprs = re.findall(r"^\s+expr: (.+)$", RULES.read_text(), re.MULTILINE)
    used = {name for e in exprs for name in re.findall(r"\bdurables_\w+", e)}
    assert used and used <= exposed, f"not exposed: {sorted(used - exposed)}"


DEAD_LETTERS = (
    "'Events went to its dead letters in the last 10 minutes (see `durables dead-letters`).'"
)
NO_CONSUMER = '"Events wait for it and nothing reads it; it holds the channel\'s events back."'


def test_the_backlog_dead_letter_and_memory_alerts_fire(tmp_path: Path) -> None:
    promtool = promtool_or_skip()
    shutil.copy(RULES, tmp_path / "rules.yml")
    labels = 'channel="orders",durable="audit"'
    (tmp_path / "test.yml").write_text(
        textwrap.dedent(f"""\
        rule_files: [rules.yml]
        evaluation_interval: 1m
        tests:
          - interval: 1m
            input_series:
              - series: 'durables_durable_oldest_unacked_age_seconds{{{labels}}}'
                values: '600+60x20'
              - series: 'durables_durable_consumers{{{labels}}}'
                values: '0x20'
              - series: 'durables_durable_depth{{{labels}}}'
                values: '8000x20'
              - series: 'durables_durable_dead_lettered_total{{{labels}}}'
                values: '0 0 1 2 3'
              - series: 'durables_server_memory_used_bytes'
                values: '95x20'
              - series: 'durables_server_memory_max_bytes'
                values: '100x20'
            alert_rule_test:
              - eval_time: 4m
                alertname: DurablesDeadLettersGrowing
                exp_alerts:
                  - exp_labels: {{channel: orders, durable: audit, severity: warning}}
                    exp_annotations:
                      summary: durable orders/audit is dead-lettering events
                      description: {DEAD_LETTERS}
              - eval_time: 10m
                alertname: DurablesServerNearMaxmemory
                exp_alerts:
                  - exp_labels: {{severity: critical}}
                    exp_annotations:
                      summary: the durables server is near its maxmemory
                      description: It uses 95% of maxmemory; at the limit publishes fail.
              - eval_time: 20m
                alertname: DurablesDurableWithoutConsumer
                exp_alerts:
                  - exp_labels: {{channel: orders, durable: audit, severity: warning}}
                    exp_annotations:
                      summary: durable orders/audit has no consumer
                      description: {NO_CONSUMER}
              - eval_time: 2m
                alertname: DurablesBacklogOld
                exp_alerts: []
              - eval_time: 10m
                alertname: DurablesBacklogOld
                exp_alerts:
                  - exp_labels: {{channel: orders, durable: audit, severity: warning}}
                    exp_annotations:
                      summary: durable orders/audit is behind
                      description: Its oldest unacknowledged event is 20m 0s old.
        """)
    )
    done = subprocess.run(
        [promtool, "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
