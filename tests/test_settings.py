"""Settings: reading them writes nothing; a process's entry point prepares the data folder; debug
pages are for ``make run`` only."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def clean_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL"}}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env | {"CTXWEB_DATA_DIR": str(data_dir)}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_importing_either_settings_module_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    code = "import ctxweb.settings, ctxweb.settings.test; print(ctxweb.settings.DATA_DIR)"
    result = run([sys.executable, "-c", code], clean_env(data))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(data)
    assert not data.exists()


def test_manage_py_prepares_the_data_folder_and_keeps_one_secret(tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    env = clean_env(data)
    first = run([sys.executable, "manage.py", "check"], env)
    assert first.returncode == 0, first.stderr
    secret = data / "secret_key"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    kept = secret.read_text()
    assert len(kept) >= 50
    assert run([sys.executable, "manage.py", "check"], env).returncode == 0
    assert secret.read_text() == kept


def test_a_secret_from_the_environment_is_never_written(tmp_path: Path) -> None:
    data = tmp_path / "fresh"
    env = clean_env(data) | {"SECRET_KEY": "from-the-environment-" + "s" * 40}
    assert run([sys.executable, "manage.py", "check"], env).returncode == 0
    assert data.is_dir()
    assert not (data / "secret_key").exists()


def test_the_suite_runs_on_the_test_settings_outside_the_project_data_folder() -> None:
    assert os.environ["DJANGO_SETTINGS_MODULE"] == "ctxweb.settings.test"
    assert settings.DEBUG is False
    assert not Path(settings.DATA_DIR).is_relative_to(ROOT)
    assert settings.STORAGES["default"]["OPTIONS"]["location"] == settings.DATA_DIR / "artifacts"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_debug_is_exported_for_make_run_only() -> None:
    """``make test`` and every other target see no ``DEBUG``; ``make run`` sets it."""
    env = {k: v for k, v in os.environ.items() if k != "DEBUG"}
    probe = 'probe: ; @echo "DEBUG=[$$DEBUG]"'
    result = run(["make", "-s", "--eval", probe, "probe"], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "DEBUG=[]"
    database = run(["make", "-pn", "run"], env).stdout
    assert re.search(r"^run: (export )?DEBUG \??= 1$", database, re.MULTILINE), (
        "make run sets DEBUG"
    )


def test_a_rate_limit_that_is_no_rate_stops_the_process_naming_it(tmp_path: Path) -> None:
    env = clean_env(tmp_path) | {"CTXWEB_RATE_LIMIT_COSTLY": "120 per minute"}
    done = run([sys.executable, "manage.py", "check"], env)
    assert done.returncode != 0
    assert "'120 per minute' is not a rate" in done.stderr
    good = run([sys.executable, "manage.py", "check"], env | {"CTXWEB_RATE_LIMIT_COSTLY": "2/s"})
    assert good.returncode == 0, good.stderr


def test_a_negative_byte_budget_stops_the_process_naming_it(tmp_path: Path) -> None:
    env = clean_env(tmp_path) | {"CTXWEB_PROXY_KEY_MB_PER_MINUTE": "-5"}
    done = run([sys.executable, "manage.py", "check"], env)
    assert done.returncode != 0
    assert "CTXWEB_PROXY_KEY_MB_PER_MINUTE=-5" in done.stderr
