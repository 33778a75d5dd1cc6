"""Reads every kind the sandbox serves with the official Kubernetes Python
client, whose generated models refuse a null or missing required field:
namespaces, pods (listed, and read one by one), services, events and
RayClusters. Prints what it read as JSON; any model error fails the run."""

import json
import sys

from kubernetes import client, config

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
pods = core.list_pod_for_all_namespaces().items
for pod in pods:
    core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
statuses = [s for pod in pods for s in (pod.status.container_statuses or [])]
clusters = client.CustomObjectsApi().list_cluster_custom_object("ray.io", "v1", "rayclusters")
print(
    json.dumps(
        {
            "namespaces": sorted(n.metadata.name for n in core.list_namespace().items),
            "pods": sorted(p.metadata.name for p in pods),
            "running": sum(p.status.phase == "Running" for p in pods),
            "image_ids": sorted({s.image_id for s in statuses}),
            "services": sorted(s.metadata.name for s in core.list_service_for_all_namespaces().items),
            "events": len(core.list_event_for_all_namespaces().items),
            "rayclusters": sorted(c["metadata"]["name"] for c in clusters["items"]),
        }
    )
)
