"""Release check of a built sdist and wheel (``scripts/test`` step 1; the packaging test runs it on a wheel).

    python scripts/check_dist.py DIST_DIR     # the folder ``python -m build`` wrote

Checks, failing with the reason:

- contents: the wheel holds every file git tracks under ``rewardzoo/`` (modules, cards, configs) and nothing of
  the repository outside it; the sdist holds those files too, with ``pyproject.toml``, ``README.md`` and
  ``LICENSE`` (it carries no tests: they need the checkout and ``../shared``);
- metadata (when a sdist is there, i.e. a release build): ``twine check --strict``, and the long description
  rendered with readme_renderer (twine passes a Markdown one it cannot render); the licence as an SPDX expression (``License-Expression``)
  with its file.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SDIST_EXTRAS = ("pyproject.toml", "README.md", "LICENSE")
LICENSE = "Apache-2.0"


def tracked_package_files() -> set[str]:
    """Paths (relative to the repository) of the files git tracks under ``rewardzoo/``."""
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "rewardzoo/"], check=True, capture_output=True, text=True
    ).stdout
    files = {p for p in out.split("\0") if p and (ROOT / p).is_file()}  # a deletion not yet committed is gone
    if not files:
        raise SystemExit("git tracks no file under rewardzoo/: run this from a git checkout")
    return files


def wheel_problems(wheel: Path, tracked: set[str]) -> list[str]:
    names = set(zipfile.ZipFile(wheel).namelist())
    problems = [f"{wheel.name} lacks {path}" for path in sorted(tracked - names)]
    strays = sorted(n for n in names if not n.startswith(("rewardzoo/", "rewardzoo-")))
    problems += [f"{wheel.name} holds {n}, which is not part of the package" for n in strays]
    compiled = sorted(n for n in names if "__pycache__" in n or n.endswith(".pyc"))
    problems += [f"{wheel.name} holds the compiled file {n}" for n in compiled]
    return problems


def sdist_problems(sdist: Path, tracked: set[str]) -> list[str]:
    with tarfile.open(sdist) as tar:
        names = {name.partition("/")[2] for name in tar.getnames()}
    return [f"{sdist.name} lacks {path}" for path in sorted((tracked | set(SDIST_EXTRAS)) - names)]


def metadata_problems(wheel: Path, dist: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = HeaderParser().parsestr(zf.read(meta_name).decode("utf-8"))
        if meta.get("License-Expression") != LICENSE:
            problems.append(f"License-Expression is {meta.get('License-Expression')!r}, not {LICENSE!r}")
        if meta.get("License"):
            problems.append('the deprecated License field is set (use an SPDX `license = "..."` string)')
        licence_file = meta_name.replace("METADATA", "licenses/LICENSE")
        if licence_file not in zf.namelist():
            problems.append(f"{wheel.name} lacks {licence_file}")
    if meta.get("Description-Content-Type") != "text/markdown":
        problems.append(f"Description-Content-Type is {meta.get('Description-Content-Type')!r}")
    try:  # twine check passes a Markdown description it could not render (it only warns): render it here
        import warnings

        from readme_renderer.markdown import render

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            rendered = render(meta.get_payload() or "")
    except (ImportError, UserWarning) as exc:
        rendered = None
        problems.append(f"cannot render Markdown here ({exc}): pip install 'readme-renderer[md]'")
    else:
        if not rendered or "<h2" not in rendered:
            problems.append("the long description did not render to HTML")
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.glob("rewardzoo-*")))],
        capture_output=True,
        text=True,
    )
    if twine.returncode != 0:
        problems.append(f"twine check failed:\n{twine.stdout}{twine.stderr}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", type=Path, help="the folder holding rewardzoo-*.whl (and rewardzoo-*.tar.gz)")
    args = parser.parse_args(argv)
    wheels = sorted(args.dist.glob("rewardzoo-*.whl"))
    sdists = sorted(args.dist.glob("rewardzoo-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) > 1:
        print(f"expected one wheel and at most one sdist in {args.dist}, found {wheels + sdists}", file=sys.stderr)
        return 1
    tracked = tracked_package_files()
    problems = wheel_problems(wheels[0], tracked)
    if sdists:
        problems += sdist_problems(sdists[0], tracked) + metadata_problems(wheels[0], args.dist)
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not problems:
        what = f"{wheels[0].name}" + (f" and {sdists[0].name}" if sdists else "")
        print(
            f"check_dist: {what} hold the {len(tracked)} tracked files under rewardzoo/"
            + ("; metadata and README render checked" if sdists else "")
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
