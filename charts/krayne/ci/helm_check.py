#!/usr/bin/env python3
"""The chart linted and rendered by Helm's own engine, and what it renders
validated against the Kubernetes schemas.

Needs `helm-python-sdk==0.2.2` (Helm v4's Go SDK through its C ABI: no
`helm` binary) and `kubernetes-validate==1.37.0` (the Kubernetes OpenAPI
schemas as JSON schemas); `.ci/run` installs both in a venv of their own.

For every values set:

- `helm_python.lint(chart, values, strict=True, namespace=..., kube_version=...)`
  at the oldest Kubernetes the chart supports (1.25) and the newest the
  schemas know (1.37): no warning or error (info findings are listed);
- `Chart.validate_schema(values)` against values.schema.json;
- `Chart.render(values, name="krayne", namespace="krayne-system",
  is_install=True)`: every rendered object parses, has a valid name and
  labels, is unique, and passes kubernetes-validate (strict: no unknown
  fields) for 1.25 and 1.37; kinds it has no schema for are listed as
  skipped (ServiceMonitor, PrometheusRule, HTTPRoute, GRPCRoute);
- rendering twice gives the same objects (except the Ray auth key Secret,
  which draws its key at render time when no cluster is there to look it
  up);

and then two releases named `krayne` in two namespaces must not share an
object (same kind, namespace and name), cluster-scoped ones included, and
adding a namespace to rbac.namespaces (the `onboarding` example) must
leave the pods' template, checksums included, as it was: no restart.

The values sets: the chart's defaults (which must lint, and which must
refuse to render, saying what to set), every `ci/*-values.yaml`, and every
values example of README.md and docs/operations.md. A docs example is the
fenced block after a line `<!-- helm-values: NAME -->` (a YAML block, or a
shell block's here-document); `<!-- helm-values: NAME over BASE -->` is a
partial example applied over another set. Where `ci/NAME-values.yaml`
exists the example must equal it. A fenced YAML block in those docs whose
keys are all top-level chart values but that is not marked is an error, so
no example escapes the check.

Usage: helm_check.py [--repo DIR]. Exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml

RELEASE = "krayne"
NAMESPACE = "krayne-system"
KUBE_VERSIONS = ("1.25.0", "1.37.0")
DOCS = ("README.md", "docs/operations.md")
# The two namespaces of the collision check.
TWO_NAMESPACES = ("krayne-staging", "krayne-production")
# Rendered at render time on purpose (see templates/ray-auth-secret.yaml).
RANDOM_AT_RENDER = {"templates/ray-auth-secret.yaml"}
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "CustomResourceDefinition",
    "PriorityClass",
    "StorageClass",
    "IngressClass",
    "GatewayClass",
    "PersistentVolume",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "APIService",
    "RuntimeClass",
}
# Names that must be DNS-1123 labels (63), not subdomains (253).
LABEL_NAMED = {"Service", "Namespace"}
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RBAC_NAME = re.compile(r"^[^/%]+$")  # RBAC objects may be named `system:…`
QUANTITY = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
MARKER = re.compile(r"^<!--\s*helm-values:\s*([a-z0-9-]+)(?:\s+over\s+([a-z0-9-]+))?\s*-->\s*$")


@dataclass
class ValuesSet:
    name: str
    values: dict[str, Any]
    source: str
    expect_refusal: bool = False


@dataclass
class Outcome:
    name: str
    source: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    objects: int = 0
    validated: int = 0
    skipped: set[str] = field(default_factory=set)


def coalesce(base: Any, overlay: Any) -> Any:
    """overlay over base as Helm coalesces values: maps merge, the rest replaces, null removes."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = coalesce(merged[key], value)
            else:
                merged[key] = copy.deepcopy(value)
        return merged
    return copy.deepcopy(overlay)


def fenced_blocks(text: str) -> list[tuple[int, str, str]]:
    """(line of the opening fence, info string, body) of each fenced block."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"^(\s*)(```+)(.*)$", lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match.groups()
        body = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append((i, info.strip(), "\n".join(body)))
        i = j + 1
    return blocks


def heredoc(body: str) -> str | None:
    """The here-document of a shell block (`cat > f <<'YAML'` … `YAML`)."""
    match = re.search(r"<<-?\s*'?\"?([A-Z_]+)'?\"?\s*\n(.*?)\n\1\s*$", body, re.DOTALL | re.MULTILINE)
    return match.group(2) if match else None


def doc_values_sets(repo: Path, chart_keys: set[str], problems: list[str]) -> list[tuple[str, str | None, Any, str]]:
    """(name, base, values, where) of every marked values example in the docs."""
    found = []
    for doc in DOCS:
        text = (repo / doc).read_text(encoding="utf-8")
        lines = text.splitlines()
        marked_lines = set()
        for number, info, body in fenced_blocks(text):
            where = f"{doc}:{number + 1}"
            previous = next((lines[k] for k in range(number - 1, -1, -1) if lines[k].strip()), "")
            marker = MARKER.match(previous.strip())
            if marker:
                marked_lines.add(number)
                name, base = marker.groups()
                source = body if info.startswith(("yaml", "yml")) else heredoc(body)
                if source is None:
                    problems.append(f"{where}: the block marked helm-values {name} has no YAML here-document")
                    continue
                try:
                    values = yaml.safe_load(source)
                except yaml.YAMLError as e:
                    problems.append(f"{where}: values example {name} is not YAML: {e}")
                    continue
                if not isinstance(values, dict):
                    problems.append(f"{where}: values example {name} is not a mapping")
                    continue
                found.append((name, base, values, where))
            elif info.startswith(("yaml", "yml")):
                try:
                    values = yaml.safe_load(body)
                except yaml.YAMLError:
                    continue
                if isinstance(values, dict) and values and set(values) <= chart_keys:
                    problems.append(
                        f"{where}: a values example without a `<!-- helm-values: NAME -->` line before it "
                        "(mark it, so that it is rendered and checked)"
                    )
    names = [name for name, *_ in found]
    for name in {n for n in names if names.count(n) > 1}:
        problems.append(f"values example {name} is given twice")
    return found


def values_sets(repo: Path, chart: helm.Chart, problems: list[str]) -> list[ValuesSet]:
    chart_dir = repo / "charts/krayne"
    sets = [ValuesSet("defaults", {}, "values.yaml", expect_refusal=True)]
    files: dict[str, dict[str, Any]] = {}
    for path in sorted((chart_dir / "ci").glob("*-values.yaml")):
        name = path.name.removesuffix("-values.yaml")
        files[name] = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        sets.append(ValuesSet(name, files[name], f"ci/{path.name}"))
    by_name = {s.name: s for s in sets}
    for name, base, values, where in doc_values_sets(repo, set(chart.values), problems):
        if name in files:
            if values != files[name]:
                problems.append(f"{where}: values example {name} differs from charts/krayne/ci/{name}-values.yaml")
            continue
        if base is not None:
            if base not in by_name:
                problems.append(f"{where}: values example {name} is over {base}, which is no values set")
                continue
            values = coalesce(by_name[base].values, values)
        by_name[name] = ValuesSet(name, values, where + (f" over {base}" if base else ""))
        sets.append(by_name[name])
    return sets


def lint(chart_dir: Path, values: dict[str, Any], outcome: Outcome) -> None:
    for version in KUBE_VERSIONS:
        report = helm.lint(str(chart_dir), values, strict=True, namespace=NAMESPACE, kube_version=f"v{version}")
        for error in report.get("errors") or []:
            outcome.problems.append(f"lint (Kubernetes {version}): {error}")
        for message in report.get("messages") or []:
            text = f"{message.get('path')}: {message.get('error')}"
            if message.get("severity", 0) >= 2:
                outcome.problems.append(f"lint (Kubernetes {version}): {text}")
            elif version == KUBE_VERSIONS[0]:
                outcome.notes.append(f"lint info: {text}")


def render(chart: helm.Chart, values: dict[str, Any], namespace: str) -> dict[str, str]:
    rendered = chart.render(values, name=RELEASE, namespace=namespace, is_install=True)
    # Keys are `<chart>/templates/…`; keep the part from `templates/`.
    return {path.split("/", 1)[1] if "/" in path else path: text for path, text in rendered.items()}


def objects_of(rendered: dict[str, str], outcome: Outcome) -> list[tuple[str, dict[str, Any]]]:
    objects = []
    for path, text in sorted(rendered.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            outcome.problems.append(f"{path}: not YAML once rendered: {e}")
            continue
        objects.extend((path, d) for d in documents if d)
    return objects


def identity(obj: dict[str, Any], namespace: str) -> tuple[str, str, str, str]:
    group = obj.get("apiVersion", "").rpartition("/")[0]
    kind = obj.get("kind", "")
    where = "" if kind in CLUSTER_SCOPED else obj.get("metadata", {}).get("namespace") or namespace
    return group, kind, where, obj.get("metadata", {}).get("name", "")


def quantities(node: Any, at: str = "") -> list[tuple[str, Any]]:
    """Every `resources.requests/limits` value under node (the schemas take any string)."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "resources" and isinstance(value, dict):
                for bound in ("requests", "limits"):
                    for name, quantity in (value.get(bound) or {}).items():
                        found.append((f"{at}/resources/{bound}/{name}", quantity))
            found.extend(quantities(value, f"{at}/{key}"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(quantities(value, f"{at}/{i}"))
    return found


def check_object(path: str, obj: dict[str, Any], outcome: Outcome) -> None:
    kind, meta = obj.get("kind"), obj.get("metadata") or {}
    name = meta.get("name")
    label = f"{path}: {kind} {name}"
    if not (obj.get("apiVersion") and kind and isinstance(name, str) and name):
        outcome.problems.append(f"{path}: an object without apiVersion, kind or metadata.name: {obj}")
        return
    if kind.startswith(("Role", "ClusterRole")):
        valid = bool(RBAC_NAME.match(name)) and len(name) <= 253
    elif kind in LABEL_NAMED:
        valid = bool(DNS_LABEL.match(name)) and len(name) <= 63
    else:
        valid = bool(DNS_SUBDOMAIN.match(name)) and len(name) <= 253
    if kind == "CronJob" and len(name) > 52:
        valid = False
    if not valid:
        outcome.problems.append(f"{label}: not a valid name for a {kind}")
    for key, value in (meta.get("labels") or {}).items():
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            outcome.problems.append(f"{label}: label {key}={value!r} is not a valid label value")
    for at, quantity in quantities(obj):
        if not QUANTITY.match(str(quantity)):
            outcome.problems.append(f"{label}: {at} = {quantity!r} is not a Kubernetes quantity")
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            outcome.skipped.add(f"{obj['apiVersion']}/{kind}")
            return
        except kubernetes_validate.ValidationError as e:
            at = "/".join(str(p) for p in e.path)
            outcome.problems.append(f"{label}: invalid for Kubernetes {version} at /{at}: {e.message}")
            return
    outcome.validated += 1


def check_set(chart_dir: Path, chart: helm.Chart, values_set: ValuesSet) -> Outcome:
    outcome = Outcome(values_set.name, values_set.source)
    values = values_set.values
    try:
        lint(chart_dir, values, outcome)
    except helm.HelmError as e:
        outcome.problems.append(f"lint failed to run: {e}")
    try:
        chart.validate_schema(values)
    except helm.HelmValuesError as e:
        outcome.problems.append(f"values.schema.json: {e}")
    if values_set.expect_refusal:
        try:
            render(chart, values, NAMESPACE)
            outcome.problems.append("rendered, but the defaults lack a token source, database and RBAC shape")
        except helm.HelmError as e:
            if "krayne: " not in str(e):
                outcome.problems.append(f"refused without saying what to set: {e}")
            else:
                said = str(e)[str(e).index("krayne: ") :].splitlines()[0]
                outcome.notes.append(f"render refused, as it must: {said[:110]}…")
        return outcome
    try:
        first = render(chart, values, NAMESPACE)
        second = render(chart, values, NAMESPACE)
    except helm.HelmError as e:
        outcome.problems.append(f"render: {e}")
        return outcome
    notes = first.get("templates/NOTES.txt", "")
    if not notes.strip():
        outcome.problems.append("NOTES.txt renders empty")
    for path in sorted(set(first) | set(second)):
        if path not in RANDOM_AT_RENDER and first.get(path) != second.get(path):
            outcome.problems.append(f"{path}: two renders of the same values differ")
    seen: dict[tuple[str, str, str, str], str] = {}
    for path, obj in objects_of(first, outcome):
        outcome.objects += 1
        key = identity(obj, NAMESPACE)
        if key in seen:
            outcome.problems.append(f"{path}: {key[1]} {key[3]} is also rendered by {seen[key]}")
        seen[key] = path
        check_object(path, obj, outcome)
    return outcome


def check_two_releases(chart: helm.Chart, values_set: ValuesSet) -> tuple[list[str], list[str]]:
    """Problems, and the objects each release puts outside its own namespace."""
    problems = []
    keys: list[set[tuple[str, str, str, str]]] = []
    outside: list[str] = []
    for namespace in TWO_NAMESPACES:
        outcome = Outcome(values_set.name, namespace)
        release = set()
        for _path, obj in objects_of(render(chart, values_set.values, namespace), outcome):
            key = identity(obj, namespace)
            release.add(key)
            if key[2] != namespace:
                outside.append(f"{namespace}: {key[1]} {key[2] + '/' if key[2] else ''}{key[3]}")
        problems.extend(outcome.problems)
        keys.append(release)
    for group, kind, where, name in sorted(keys[0] & keys[1]):
        problems.append(
            f"{values_set.name}: both releases render {kind} {name}"
            + (f" in namespace {where}" if where else " (cluster-scoped)")
        )
    return problems, outside


def pod_template(chart: helm.Chart, values: dict[str, Any]) -> Any:
    """The Deployment's pod template (annotations with the checksums included)."""
    outcome = Outcome("", "")
    for _path, obj in objects_of(render(chart, values, NAMESPACE), outcome):
        if obj.get("kind") == "Deployment":
            return obj["spec"]["template"]
    return None


def check_onboarding(chart: helm.Chart, sets: list[ValuesSet]) -> list[str]:
    """Adding a namespace (the `onboarding` example over its base) must not change the pods' template."""
    by_name = {s.name: s for s in sets}
    onboarding = by_name.get("onboarding")
    base = by_name.get("production")
    if onboarding is None or base is None:
        return ["no onboarding example over production to compare"]
    added = set(onboarding.values["rbac"]["namespaces"]) - set(base.values["rbac"]["namespaces"])
    if not added:
        return ["the onboarding example adds no namespace"]
    if pod_template(chart, onboarding.values) != pod_template(chart, base.values):
        return [f"adding {', '.join(sorted(added))} to rbac.namespaces changes the pods' template: it would roll them"]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[3])
    args = parser.parse_args()
    repo = args.repo.resolve()
    chart_dir = repo / "charts/krayne"
    chart = helm.Chart.load(str(chart_dir))
    print(
        f"Helm SDK {helm.helm_sdk_version()} (helm-c {helm.helm_c_version()}), "
        f"kubernetes-validate {kubernetes_validate.__version__}, chart {chart.name} {chart.version}"
    )
    problems: list[str] = []
    sets = values_sets(repo, chart, problems)
    outcomes = [check_set(chart_dir, chart, s) for s in sets]
    skipped: set[str] = set()
    for outcome in outcomes:
        verdict = "FAIL" if outcome.problems else "ok"
        if outcome.objects:
            counts = f"{outcome.objects} objects, {outcome.validated} validated for {' and '.join(KUBE_VERSIONS)}"
        else:
            counts = "no objects"
        print(f"{verdict:4} {outcome.name:28} {counts}  [{outcome.source}]")
        for note in outcome.notes:
            print(f"       {note}")
        for problem in outcome.problems:
            print(f"       {problem}")
        skipped |= outcome.skipped
        problems.extend(f"{outcome.name}: {p}" for p in outcome.problems)
    for values_set in sets:
        if values_set.name in ("all-features", "production"):
            collisions, outside = check_two_releases(chart, values_set)
            verdict = "FAIL" if collisions else "ok"
            print(
                f"{verdict:4} two releases '{RELEASE}' in {' and '.join(TWO_NAMESPACES)} ({values_set.name}): "
                f"{len(outside) // 2} objects each outside their namespace, none shared"
                if not collisions
                else f"{verdict:4} two releases ({values_set.name}): {len(collisions)} shared objects"
            )
            for line in collisions:
                print(f"       {line}")
            problems.extend(collisions)
    onboarding = check_onboarding(chart, sets)
    print(
        f"{'FAIL' if onboarding else 'ok':4} adding a namespace to rbac.namespaces leaves the pods' template "
        f"(and checksums) as they were{'' if not onboarding else ': ' + '; '.join(onboarding)}"
    )
    problems.extend(onboarding)
    print(f"kinds without a Kubernetes schema (not validated): {', '.join(sorted(skipped)) or 'none'}")
    for problem in [p for p in problems if not any(p.startswith(f"{o.name}: ") for o in outcomes)]:
        print(f"FAIL {problem}")
    names = [o.name for o in outcomes]
    for required in ("defaults", "all-features", "production", "readme"):
        if required not in names:
            problems.append(f"no values set {required}")
            print(f"FAIL no values set {required}")
    failing = sum(bool(o.problems) for o in outcomes)
    print(f"values sets: {len(outcomes) - failing} ok, {failing} failing; {len(problems)} problems in all")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
