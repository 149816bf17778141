"""Without Ray: ``import rewardzoo`` and the local CLI never import ray; ``--engine ray`` names the pip command."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from rewardzoo.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _manifest(tmp_path: Path) -> tuple[Path, Path]:
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": "p" * i}) for i in range(3)) + "\n")
    config = tmp_path / "cfg.yaml"
    config.write_text("rewards:\n  - name: len\n    reward_model: tests.no_extras.rewards:PromptLength\n")
    return path, config


def test_import_and_local_cli_never_import_ray(tmp_path):
    path, config = _manifest(tmp_path)
    code = (
        "import sys, rewardzoo\nfrom rewardzoo.cli import main\n"
        f"assert main(['score', {str(config)!r}, '-i', {str(path)!r}, '-o', {str(tmp_path / 'o.jsonl')!r}, '-q']) == 0\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 3


def test_engine_ray_without_ray_names_the_pip_command(tmp_path, monkeypatch, capsys):
    path, config = _manifest(tmp_path)
    real = importlib.import_module

    def fake(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named '{name}'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", fake)
    out = tmp_path / "o.jsonl"
    assert main(["score", str(config), "-i", str(path), "-o", str(out), "--engine", "ray"]) == 2
    assert "pip install 'rewardzoo[ray]'" in capsys.readouterr().err
    assert not out.exists()
