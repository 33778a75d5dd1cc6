"""Asks the sandbox for a ServiceAccount token with the official Kubernetes
Python client, as a pipeline's tooling would: creates the ServiceAccount,
then a TokenRequest for audience `krayne`. Prints the TokenRequest's status
as JSON."""

import json
import sys

from kubernetes import client, config

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
core.create_namespaced_service_account(
    "ml", client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="py-pipeline"))
)
review = core.create_namespaced_service_account_token(
    "py-pipeline",
    "ml",
    client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=["krayne"], expiration_seconds=600)
    ),
)
print(
    json.dumps(
        {
            "token": review.status.token,
            "expiration": review.status.expiration_timestamp.isoformat(),
            "audiences": review.spec.audiences,
        }
    )
)
