"""A cron schedule has five fields: six (seconds) or seven (years) are refused with a message
that says so and points at ``every``, naming file, line and field like every spec error."""

from __future__ import annotations

import pytest

from core.spec.loader import load_dir


@pytest.mark.parametrize(("expr", "n"), [("0 */5 * * * *", 6), ("0 0 12 * * ? 2027", 7), ("*/5 * * *", 4),
                                         ("@daily", 1)])
def test_cron_with_other_than_five_fields_is_refused(tmp_path, expr, n):
    (tmp_path / "j.toml").write_text(f'name = "j"\ncommand = "true"\nschedule = "{expr}"\n')
    res = load_dir(tmp_path)
    [err] = res.errors
    assert (err.line, err.job, err.field) == (3, "j", "schedule")
    assert f"cron has five fields (minute hour day-of-month month day-of-week), this has {n}" in err.message
    assert "every" in err.message and not res.jobs


def test_five_fields_with_extra_spaces_load(tmp_path):
    (tmp_path / "j.toml").write_text('name = "j"\ncommand = "true"\nschedule = " 30  2 * * 1-5 "\n')
    res = load_dir(tmp_path)
    assert not res.errors and "j" in res.jobs
