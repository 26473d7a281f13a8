"""Authenticates with the official Kubernetes Python client through one kubeconfig (a token, a
client certificate, or a ServiceAccount token) and checks who the server says it is and that
the user can read the ConfigMaps of team-a.

Usage: credentials_check.py KUBECONFIG EXPECTED_USERNAME; prints CREDENTIALS-OK on success.
"""

import sys

from kubernetes import client, config


def main():
    kubeconfig, expected = sys.argv[1], sys.argv[2]
    api_client = config.new_client_from_config(config_file=kubeconfig)
    review = client.AuthenticationV1Api(api_client).create_self_subject_review(body=client.V1SelfSubjectReview())
    username = review.status.user_info.username
    assert username == expected, f"authenticated as {username!r}, expected {expected!r}"
    names = [cm.metadata.name for cm in client.CoreV1Api(api_client).list_namespaced_config_map("team-a").items]
    assert "settings" in names, names
    print("CREDENTIALS-OK", username)


if __name__ == "__main__":
    main()
