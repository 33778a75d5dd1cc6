"""Unit tests of version_lock.py: `python3 -m unittest discover -s charts/krayne/ci -p 'test_*.py'`."""

from __future__ import annotations

import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import version_lock  # noqa: E402

CHART = Path(__file__).resolve().parent.parent


class VersionLockTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())
        self.chart = self.tmp / "krayne"
        shutil.copytree(CHART, self.chart, ignore=shutil.ignore_patterns("__pycache__"))
        # A known-good state: the lock matches whatever the chart is now.
        version = version_lock.chart_version(self.chart)
        (self.chart / "ci/version.lock").write_text(f"{version} {version_lock.content_digest(self.chart)}\n")

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp)

    def set_version(self, version: str) -> None:
        path = self.chart / "Chart.yaml"
        text = path.read_text()
        path.write_text(version_lock.VERSION_LINE.sub(f"version: {version}", text, count=1))

    def test_the_committed_chart_passes(self) -> None:
        self.assertEqual(version_lock.check(CHART), [])

    def test_a_matching_lock_passes(self) -> None:
        self.assertEqual(version_lock.check(self.chart), [])

    def test_a_template_change_without_a_bump_fails_and_prints_the_line(self) -> None:
        template = self.chart / "templates/pdb.yaml"
        template.write_text(template.read_text() + "# a change\n")
        problems = version_lock.check(self.chart)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("content changed", problems[0])
        self.assertIn(version_lock.content_digest(self.chart), problems[0])

    def test_values_schema_files_and_chart_yaml_are_covered(self) -> None:
        before = version_lock.content_digest(self.chart)
        for relative in ["values.yaml", "values.schema.json", "files/rbac/cluster.yaml", "Chart.yaml"]:
            path = self.chart / relative
            original = path.read_bytes()
            path.write_bytes(original + b"\n")
            self.assertNotEqual(version_lock.content_digest(self.chart), before, relative)
            path.write_bytes(original)
        self.assertEqual(version_lock.content_digest(self.chart), before)

    def test_the_version_line_the_changelog_and_ci_are_not_covered(self) -> None:
        before = version_lock.content_digest(self.chart)
        self.set_version("99.0.0")
        (self.chart / "CHANGELOG.md").write_text("# changed\n")
        (self.chart / "ci/all-features-values.yaml").write_text("{}\n")
        self.assertEqual(version_lock.content_digest(self.chart), before)

    def test_a_bump_needs_the_lock_and_a_changelog_section(self) -> None:
        current = version_lock.chart_version(self.chart)
        bumped = version_lock.next_minor(current)
        self.set_version(bumped)
        problems = version_lock.check(self.chart)
        self.assertTrue(any("set ci/version.lock" in p and bumped in p for p in problems), problems)
        self.assertTrue(any("CHANGELOG.md has no section" in p for p in problems), problems)
        changelog = self.chart / "CHANGELOG.md"
        changelog.write_text(changelog.read_text().replace("## ", f"## {bumped}\n\nA change.\n\n## ", 1))
        (self.chart / "ci/version.lock").write_text(f"{bumped} {version_lock.content_digest(self.chart)}\n")
        self.assertEqual(version_lock.check(self.chart), [])

    def test_a_version_may_not_go_backwards_or_be_no_semver(self) -> None:
        self.set_version("0.0.1")
        self.assertTrue(any("older than" in p for p in version_lock.check(self.chart)))
        self.set_version("1.0")
        self.assertTrue(any("not a semantic version" in p for p in version_lock.check(self.chart)))

    def test_semver_order(self) -> None:
        order = ["0.9.0", "0.10.0", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "10.0.0"]
        self.assertEqual(sorted(order, key=version_lock.parse_semver), order)


if __name__ == "__main__":
    unittest.main()
