"""Port-forwards to a head pod with the official Kubernetes Python client's
`portforward` (WebSocket, v4.channel.k8s.io): the SSH server's banner,
the Ray client's greeting and a 10 MiB echo through it compared by
sha256, the dashboard's /api/version, the notebook's and code-server's
pages. Prints what it saw as JSON."""

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
    client.CoreV1Api().connect_get_namespaced_pod_portforward, pod, namespace, ports="22,8265,10001,8888,8443"
)

ssh = forward.socket(22)
ssh.settimeout(30)
banner = ssh.recv(256)
ray_client = forward.socket(10001)
ray_client.settimeout(30)
greeting = ray_client.recv(256).decode()
payload = os.urandom(10 * 1024 * 1024)
sender = threading.Thread(target=ray_client.sendall, args=(payload,))
sender.start()
echoed = bytearray()
while len(echoed) < len(payload):
    chunk = ray_client.recv(1024 * 1024)
    if not chunk:
        break
    echoed.extend(chunk)
sender.join()


def http_get(port, path, until):
    sock = forward.socket(port)
    sock.settimeout(30)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: pod\r\n\r\n".encode())
    answer = b""
    while until not in answer:
        chunk = sock.recv(4096)
        if not chunk:
            break
        answer += chunk
    return answer.decode()


answer = http_get(8265, "/api/version", b"}").encode()
notebook = http_get(8888, "/tree", b"</script>")
code_server = http_get(8443, "/", b"</p>")

print(
    json.dumps(
        {
            "banner": banner.decode(),
            "sent_sha256": hashlib.sha256(payload).hexdigest(),
            "echoed_sha256": hashlib.sha256(bytes(echoed)).hexdigest(),
            "echoed_bytes": len(echoed),
            "version": answer.decode().split("\r\n\r\n", 1)[-1],
            "notebook": notebook,
            "code_server": code_server,
            "ray_client": greeting,
        }
    )
)
forward.close()
