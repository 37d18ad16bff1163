"""``python -m pipeline``'s own edges: what it writes besides the results, and how it ends."""

from __future__ import annotations

from pathlib import Path

from tests.pipeline.helpers import run_pipeline

SECRET, PASSWORD = "SeCrEt-token-4f2a9", "hunter2-pw-77"


def files_holding(folder: Path, text: str) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.suffix != ".db"
            and text.encode() in p.read_bytes()]


def test_secrets_given_on_the_command_line_reach_no_file_not_even_hydras(launch_dir):
    done = run_pipeline(launch_dir, "-m", "retriever.k1=0.9,1.2", f"+tags.api_key={SECRET}",
                        f"+tags.source_db=postgresql://alice:{PASSWORD}@db.example/runs", "quiet=true")
    assert done.returncode == 0, done.stderr[-3000:]
    hydra_files = sorted(str(p.relative_to(launch_dir)) for p in launch_dir.rglob("*.yaml"))
    assert any(name.endswith("multirun.yaml") for name in hydra_files)
    assert any(name.endswith(".hydra/overrides.yaml") for name in hydra_files)
    assert files_holding(launch_dir, SECRET) == [] and files_holding(launch_dir, PASSWORD) == []
    assert SECRET not in done.stdout + done.stderr and PASSWORD not in done.stdout + done.stderr
    overrides = next(launch_dir.rglob(".hydra/overrides.yaml")).read_text()
    assert "+tags.api_key=***" in overrides and "alice\\:***@db.example/runs" in overrides  # Hydra escapes ":"
