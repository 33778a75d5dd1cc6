"""Port-forwards to a head pod with the official Kubernetes Python client's
`portforward` (WebSocket, v4.channel.k8s.io): the SSH stand-in's banner
and a 10 MiB echo compared by sha256, and the dashboard's /api/version.
Prints what it saw as JSON."""

import hashlib
import json
import os
import sys
import threading

from kubernetes import client, config
from kubernetes.stream import portforward

config.load_kube_config(config_file=sys.argv[1])
namespace, pod = sys.argv[2], sys.argv[3]
forward = portforward(
    client.CoreV1Api().connect_get_namespaced_pod_portforward, pod, namespace, ports="22,8265"
)

ssh = forward.socket(22)
ssh.settimeout(30)
banner = ssh.recv(256)
payload = os.urandom(10 * 1024 * 1024)
sender = threading.Thread(target=ssh.sendall, args=(payload,))
sender.start()
echoed = bytearray()
while len(echoed) < len(payload):
    chunk = ssh.recv(1024 * 1024)
    if not chunk:
        break
    echoed.extend(chunk)
sender.join()

dashboard = forward.socket(8265)
dashboard.settimeout(30)
dashboard.sendall(b"GET /api/version HTTP/1.1\r\nHost: pod\r\n\r\n")
answer = b""
while not answer.endswith(b"}"):
    chunk = dashboard.recv(4096)
    if not chunk:
        break
    answer += chunk

print(
    json.dumps(
        {
            "banner": banner.decode(),
            "sent_sha256": hashlib.sha256(payload).hexdigest(),
            "echoed_sha256": hashlib.sha256(bytes(echoed)).hexdigest(),
            "echoed_bytes": len(echoed),
            "version": answer.decode().split("\r\n\r\n", 1)[-1],
        }
    )
)
forward.close()
