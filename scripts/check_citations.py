"""Check the model cards' citations of reference code against local git mirrors of the references.

A citation is a commit of a reference repository, written ``owner/name@COMMIT``, ``name@COMMIT`` or ``Name COMMIT``
(the repository's own name, e.g. ``Pref-GRPO 3e787f6``), optionally followed by file paths and line numbers
(``path/file.py 40-56, 61``). For each one this script checks, mechanically:

- the repository has a mirror (``--mirrors``, default /work/.mirror: ``OWNER+NAME/repo``, a bare git directory, as
  the session's ``fetch`` tool leaves them);
- the commit is in the mirror's history (``git cat-file -e COMMIT^{commit}``);
- each file cited with line numbers exists at that commit (a path may be written relative: ``dispatcher.py`` is
  found by its suffix, ``qwen3vl.py`` beside the path before it); a path named without lines that is not found is
  printed for a person to look at (it may be another project's file named in the same sentence);
- each cited line number exists in the file.

Whether the lines *say* what the card says is for a person: ``--show`` prints them. Nothing here is run by the test
suite (it reads mirrors outside the repository).

Run: ``python scripts/check_citations.py [--cards rewardzoo/model_cards] [--mirrors /work/.mirror] [--show]
[--only NAME ...]``. Exit status 1 when a commit is missing from its repository's history or a cited file or line
does not exist.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HEX = r"[0-9a-f]{7,40}"
#: ``owner/name@commit`` or ``name@commit`` (a release tag such as ``v20250625`` too).
AT = re.compile(rf"(?P<repo>(?:[A-Za-z0-9_.-]+/)?[A-Za-z0-9_.-]+)@(?P<commit>{HEX}|v\d[\w.-]*\w)\b")
#: Commits no fetchable mirror holds but the code search store does (a file read at that commit with its
#: ``read_file`` tool): checked by hand, reported as such rather than as problems.
ELSEWHERE = {
    ("tencent-hunyuan/unirl", "0f5d2ae"): "unirl/reward/local/clap.py read at 0f5d2ae6 from the code store; the newest "
    "fetchable snapshot is 1a7b501 (2026-06-13), older than the CLAP scorer",
    ("mizzenai/hpsv3", "d232ff8"): "the fetchable mirror is HPSv3's project page; hpsv3/config/HPSv3_7B.yaml read at "
    "d232ff86 from the code store (lines 55-56: bf16: True, torch_dtype: bfloat16)",
    ("hpsv3", "d232ff8"): "as MizzenAI/HPSv3@d232ff8 (hpsv3/model/qwen2vl_trainer.py stored at d232ff86)",
    ("hpsv3", "72b7eba"): "the fetchable mirror is HPSv3's project page; hpsv3/inference.py is stored at 72b7ebaf in "
    "the code store (whether 72b7eba and d232ff8 are one line of history cannot be read there)",
}
#: A file path followed by line numbers: ``path.py 40-56, 61``.
PATH_LINES = re.compile(
    r"`?(?P<path>[A-Za-z0-9_./-]+\.(?:py|sh|yaml|yml|md|json|txt|cfg|toml))`?"
    r"(?P<lines>(?:[ ,]+(?:and )?\d+(?:-\d+)?(?![\d.-])(?!\s+(?!and\b)[A-Za-z]))*)"
)


@dataclass
class Citation:
    """One cited commit with the files (and lines) cited beside it."""

    card: str
    line: int
    repo: str
    commit: str
    files: list[tuple[str, list[tuple[int, int]]]] = field(default_factory=list)


def mirrors(root: Path) -> dict[str, Path]:
    """``{lower-case 'owner/name' and 'name': git dir}`` of the mirrors under ``root``."""
    found: dict[str, Path] = {}
    for d in sorted(root.glob("*+*")):
        git = d / "repo"
        if not git.is_dir():
            continue
        owner, name = d.name.split("+", 1)
        found[f"{owner}/{name}".lower()] = git
        found.setdefault(name.lower(), git)
    return found


def line_ranges(text: str) -> list[tuple[int, int]]:
    out = []
    for part in re.findall(r"\d+(?:-\d+)?", text):
        lo, _, hi = part.partition("-")
        out.append((int(lo), int(hi or lo)))
    return out


def _files_after(text: str) -> list[tuple[str, list[tuple[int, int]]]]:
    """The paths (with their lines) cited in ``text``, up to the next citation of another commit."""
    files = []
    for m in PATH_LINES.finditer(text):
        path = m.group("path")
        if "/" not in path and "." not in path:
            continue
        files.append((path, line_ranges(m.group("lines") or "")))
    return files


def _commit_in(repo: Path | None, commit: str) -> bool:
    return repo is not None and git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


def _card_repo(text: str, known: dict[str, Path]) -> str | None:
    """The card's ``reference: repository:`` as ``owner/name`` when a mirror of it is known."""
    m = re.search(r"repository: https://github.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)", text)
    return m.group(1) if m and m.group(1).lower() in known else None


def citations(card: Path, known: dict[str, Path]) -> tuple[list[Citation], list[str]]:
    """Every citation of a commit in one card, and the hex words it could not attribute to a repository.

    A citation's files are the paths written after it up to the next citation, over the following lines of the
    same paragraph (a blank line, a front-matter key or a table row ends it). A bare hex word is a citation of the
    current paragraph's repository, else of the card's reference repository, when it is a commit there. Paths with
    line numbers in a paragraph that cites no commit are read at the section's last citation, else at the first commit
    the card cites of its reference repository (else its first citation)."""
    found: list[Citation] = []
    unattributed: list[str] = []
    text = card.read_text()
    home = _card_repo(text, known)
    current: Citation | None = None
    orphans: list[tuple[int, list[tuple[str, list[tuple[int, int]]]]]] = []
    section: Citation | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.startswith("#") or raw.startswith("---"):
            section = None
        if "generated:" in raw or raw.startswith("|") or not raw.strip() or re.match(r"^[A-Za-z_]+:", raw):
            current = None
        if "generated:" in raw or raw.startswith("|"):
            continue
        spans = [(m.start(), m.end(), m.group("repo"), m.group("commit")) for m in AT.finditer(raw)]
        for m in re.finditer(rf"\b(?P<name>[A-Za-z0-9_.-]+) (?:at |commit )?(?P<commit>{HEX})\b", raw):
            if any(s <= m.start("commit") < e for s, e, *_ in spans):
                continue
            name = m.group("name")
            mirrored = name.lower() in known or name.lower().replace("_", "-") in known
            # a word shaped like a repository's name with no mirror here is a citation too (reported: no mirror)
            if mirrored or re.search(r"[-_]|[a-z][A-Z]", name):
                spans.append((m.start(), m.end(), name, m.group("commit")))
        for m in re.finditer(rf"(?<![/\w.+-])(?P<commit>{HEX})(?![\w.-])", raw):
            word = m.group("commit")
            if any(s <= m.start() < e for s, e, *_ in spans) or not re.search("[a-f]", word) or word.isalpha():
                continue
            repo = current.repo if current else None
            for candidate in (repo, home):
                path = known.get(candidate.lower()) if candidate else None
                if _commit_in(path, word):
                    spans.append((m.start(), m.end(), str(candidate), word))
                    break
            else:
                unattributed.append(f"{card.name}:{number} {word}")
        spans.sort()
        head = raw[: spans[0][0]] if spans else raw
        cited = [(p, r) for p, r in _files_after(head) if r]  # a continuation: only paths cited with lines
        if current is not None:
            current.files += cited
        elif cited and section is not None:  # the section's last citation (a list after the paragraph citing it)
            found.append(Citation(card.name, number, section.repo, section.commit, cited))
        elif cited:
            orphans.append((number, cited))
        for i, (_start, end, repo, commit) in enumerate(spans):
            stop = spans[i + 1][0] if i + 1 < len(spans) else len(raw)
            current = section = Citation(card.name, number, repo, commit, _files_after(raw[end:stop]))
            found.append(current)
    # paths with lines in a paragraph that names no commit: the card's own reference at the commit it cites first
    mine = [c for c in found if home and known.get(c.repo.lower()) == known.get(home.lower())] or found[:1]
    for number, cited in orphans:
        if mine:
            found.append(Citation(card.name, number, mine[0].repo, mine[0].commit, cited))
        else:
            unattributed += [f"{card.name}:{number} {p} {r} (no commit cited in the card)" for p, r in cited]
    return found, unattributed


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def resolve_path(
    repo: Path, commit: str, path: str, cache: dict[tuple[str, str], list[str]], near: str | None = None
) -> str | None:
    """The file at ``commit`` that ``path`` names: ``near``'s folder joined with it (a path written after another
    of the same folder), else itself, else the one file ending in ``/path``."""
    key = (str(repo), commit)
    if key not in cache:
        cache[key] = git(repo, "ls-tree", "-r", "--name-only", commit).stdout.splitlines()
    names = cache[key]
    if near and "/" in near and f"{near.rsplit('/', 1)[0]}/{path}" in names:
        return f"{near.rsplit('/', 1)[0]}/{path}"
    if path in names:
        return path
    ends = [n for n in names if n.endswith("/" + path)]
    return ends[0] if len(ends) == 1 else None


def check(cit: Citation, known: dict[str, Path], show: bool, cache: dict) -> list[str]:
    """Problems with one citation (empty: it checks out); prints what it checked."""
    repo = known.get(cit.repo.lower()) or known.get(cit.repo.lower().replace("_", "-"))
    where = f"{cit.card}:{cit.line} {cit.repo}@{cit.commit}"
    if repo is None:
        print(f"  NO MIRROR  {where}")
        return []
    if git(repo, "cat-file", "-e", f"{cit.commit}^{{commit}}").returncode != 0:
        note = ELSEWHERE.get((cit.repo.lower(), cit.commit))
        if note:
            print(f"  ELSEWHERE  {where}: {note}")
            return []
        print(f"  MISSING    {where}: not in the mirror's history")
        return [f"{where}: commit not in the history"]
    problems = []
    print(f"  ok commit  {where}")
    near = None
    for path, ranges in cit.files:
        full = resolve_path(repo, cit.commit, path, cache, near)
        if full is None:
            # a path cited with lines must exist; one without may be another project's file named nearby
            print(f"    no file  {path}{' (cited with lines)' if ranges else ' (named without lines: look)'}")
            if ranges:
                problems.append(f"{where}: no file {path}")
            continue
        near = full
        lines = git(repo, "show", f"{cit.commit}:{full}").stdout.splitlines()
        bad = [r for r in ranges if r[1] > len(lines) or r[0] < 1]
        print(f"    file     {full} ({len(lines)} lines){' lines ' + str(ranges) if ranges else ''}")
        if bad:
            problems.append(f"{where}: {full} has {len(lines)} lines, cited {bad}")
        if show:
            for lo, hi in ranges:
                for n in range(lo, min(hi, len(lines)) + 1):
                    print(f"      {n:5d}| {lines[n - 1]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", default="rewardzoo/model_cards")
    parser.add_argument("--mirrors", default="/work/.mirror")
    parser.add_argument("--show", action="store_true", help="print the cited lines")
    parser.add_argument("--only", nargs="*", help="card names (without .md)")
    args = parser.parse_args(argv)
    known = mirrors(Path(args.mirrors))
    problems: list[str] = []
    cache: dict = {}
    for card in sorted(Path(args.cards).glob("*.md")):
        if args.only and card.stem not in args.only:
            continue
        cits, loose = citations(card, known)
        if not cits and not loose:
            continue
        print(card.name)
        for word in loose:
            print(f"  unattributed (not a commit of a mirrored repository) {word}")
        seen = set()
        for cit in cits:
            key = (cit.repo, cit.commit, tuple((p, tuple(r)) for p, r in cit.files))
            if key in seen:
                continue
            seen.add(key)
            problems += check(cit, known, args.show, cache)
    print(f"\n{len(problems)} problem(s)")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
