"""``watchkeeper check`` shows every problem of a file in one pass: cross-field errors beside
field errors, a mistyped sink type in our words, an unusable Apprise URL as one line (no
library log line), and a webhook URL that is no URL."""

from __future__ import annotations

from tests.kit.cli import wk

JOB = """name = "bad"
command = "true"
schedule = "0 * * * *"
every = "5m"
retry_on = [1, 2]
no_retry_on = [2]
timeout = -3
"""

SETTINGS = """heartbeat = "20s"

[[notify]]
type = "emial"
name = "a"

[[notify]]
type = "apprise"
name = "b"
url = "mailto://"

[[notify]]
type = "webhook"
name = "c"
url = "not a url"

[[notify]]
type = "command"
name = "c"
command = ["true"]
"""


def test_check_lists_field_and_cross_field_errors_of_every_file_at_once(tmp_path):
    (tmp_path / "bad.toml").write_text(JOB)
    (tmp_path / "watchkeeper.toml").write_text(SETTINGS)
    res = wk("check", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 1
    job, conf = tmp_path / "bad.toml", tmp_path / "watchkeeper.toml"
    assert res.stdout.splitlines() == [
        f"{job}:4: job 'bad': field 'every': give only one of schedule, every, once (got schedule, every)",
        f"{job}:6: job 'bad': field 'no_retry_on': an exit code cannot be in both retry_on and no_retry_on (2)",
        f"{job}:7: job 'bad': field 'timeout': Input should be greater than 0",
        f"{conf}:1: field 'heartbeat': heartbeat (20s) must be at most a third of lease (30s), so one missed"
        " heartbeat never expires a live run's lease",
        f"{conf}:4: field 'notify[0].type': unknown sink type 'emial' (command, webhook, apprise)",
        f"{conf}:10: field 'notify[1].url': not a usable Apprise URL (scheme 'mailto': Could not load E-Mail URL);"
        " see the Apprise wiki for URL forms",
        f"{conf}:15: field 'notify[2].url': must be an http:// or https:// URL with a host, such as"
        " https://hooks.example.com/x",
        f"{conf}:19: field 'notify[3].name': sink names must be unique ('c' is also notify[2])",
    ]
    assert "apprise" not in res.stderr.lower().split("error(s)")[0]  # no library log line
    assert res.stderr.strip().startswith("8 error(s) in")
