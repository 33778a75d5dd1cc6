#!/usr/bin/env python3
"""The chart's version moves with its content.

`ci/version.lock` holds one line, `<version> sha256:<digest>`: the chart's
version and a digest of what the chart installs (templates/, files/,
values.yaml, values.schema.json, and Chart.yaml without its `version:`
line). This check fails

- when the content changed but Chart.yaml's version did not (bump it, add
  its section to CHANGELOG.md, and paste the printed lock line);
- when the version was bumped but the lock not updated (paste the line);
- when the version is not a semantic version, or went backwards;
- when CHANGELOG.md has no section `## <version>` for the current version.

The lock pins the content of a version once it is released: further
edits within the same unreleased change (before it lands) re-paste the
`--print` line without another bump; after it lands, a change needs a new
version.

Standard library only. `python3 version_lock.py [CHART_DIR]` checks;
`--print` prints the lock line for the chart as it is.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

CHART_DIR = Path(__file__).resolve().parent.parent
LOCK = Path("ci/version.lock")
HASHED_DIRS = ("templates", "files")
HASHED_FILES = ("values.yaml", "values.schema.json")
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
VERSION_LINE = re.compile(r"^version:.*$", re.MULTILINE)


def chart_version(chart_dir: Path) -> str:
    """The `version:` of Chart.yaml (a top-level scalar, optionally quoted)."""
    text = (chart_dir / "Chart.yaml").read_text(encoding="utf-8")
    match = re.search(r"^version:\s*['\"]?([^'\"\s#]+)['\"]?\s*(?:#.*)?$", text, re.MULTILINE)
    if not match:
        raise ValueError("Chart.yaml has no top-level version")
    return match.group(1)


def hashed_files(chart_dir: Path) -> list[Path]:
    """The files the digest covers, as paths relative to the chart, sorted."""
    files = [Path(name) for name in HASHED_FILES]
    for directory in HASHED_DIRS:
        files.extend(p.relative_to(chart_dir) for p in (chart_dir / directory).rglob("*") if p.is_file())
    return sorted(files, key=lambda p: p.as_posix())


def content_digest(chart_dir: Path) -> str:
    """sha256 over each covered file's path and content, and Chart.yaml less its version line."""
    digest = hashlib.sha256()

    def add(name: str, data: bytes) -> None:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).hexdigest().encode() + b"\n")

    chart_yaml = (chart_dir / "Chart.yaml").read_text(encoding="utf-8")
    add("Chart.yaml", VERSION_LINE.sub("", chart_yaml).encode())
    for path in hashed_files(chart_dir):
        add(path.as_posix(), (chart_dir / path).read_bytes())
    return "sha256:" + digest.hexdigest()


def parse_semver(version: str) -> tuple[int, int, int, tuple]:
    match = SEMVER.match(version)
    if not match:
        raise ValueError(f"{version!r} is not a semantic version")
    major, minor, patch, pre, _build = match.groups()
    # A pre-release sorts before its release.
    pre_key: tuple = (1,) if pre is None else (0, *[(0, int(p)) if p.isdigit() else (1, p) for p in pre.split(".")])
    return int(major), int(minor), int(patch), pre_key


def next_minor(version: str) -> str:
    major, minor, _patch, _pre = parse_semver(version)
    return f"{major}.{minor + 1}.0"


def read_lock(chart_dir: Path) -> tuple[str, str]:
    text = (chart_dir / LOCK).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) != 1 or len(lines[0].split()) != 2:
        raise ValueError(f"{LOCK} must hold one line `<version> sha256:<digest>`")
    version, digest = lines[0].split()
    return version, digest


def changelog_versions(chart_dir: Path) -> set[str]:
    """The versions CHANGELOG.md has a `## <version>` section for."""
    text = (chart_dir / "CHANGELOG.md").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^##\s+\[?v?([0-9][^\s\]]*)\]?", text, re.MULTILINE)}


def check(chart_dir: Path = CHART_DIR) -> list[str]:
    """Problems with the chart's version, lock and changelog (empty: none)."""
    problems: list[str] = []
    version = chart_version(chart_dir)
    digest = content_digest(chart_dir)
    try:
        parse_semver(version)
    except ValueError as e:
        return [f"Chart.yaml: {e}"]
    locked_version, locked_digest = read_lock(chart_dir)
    line = f"{version} {digest}"
    if (version, digest) != (locked_version, locked_digest):
        if version == locked_version:
            bumped = next_minor(version)
            problems.append(
                f"the chart's content changed but its version is still {version}: bump `version` in "
                f"Chart.yaml (e.g. to {bumped}, or a patch for a fix, a major for a breaking change "
                f"after 1.0), add `## {bumped}` with upgrade notes to CHANGELOG.md, and set "
                f"{LOCK} to the line\n    {bumped} {digest}"
            )
        elif parse_semver(version) < parse_semver(locked_version):
            problems.append(f"Chart.yaml's version {version} is older than the locked {locked_version}")
        else:
            problems.append(f"the version was bumped to {version}; set {LOCK} to the line\n    {line}")
    if version not in changelog_versions(chart_dir):
        problems.append(f"CHANGELOG.md has no section `## {version}` (upgrade notes for this version)")
    return problems


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    chart_dir = Path(args[0]).resolve() if args else CHART_DIR
    if "--print" in argv:
        print(f"{chart_version(chart_dir)} {content_digest(chart_dir)}")
        return 0
    problems = check(chart_dir)
    for problem in problems:
        print(f"version lock: {problem}", file=sys.stderr)
    if not problems:
        print(f"version lock: {chart_version(chart_dir)} matches {LOCK} and CHANGELOG.md")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
