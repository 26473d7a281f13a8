"""Drives oxplane with the official Kubernetes Python client (the `kubernetes` package).

Run by the Rust test `python_client` with KUBECONFIG pointing at a running server; exits
non-zero (with a traceback) on any mismatch.
"""

import threading
import time

from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

config.load_kube_config()
core = client.CoreV1Api()

# Listing an empty kind gives `items: []` (the strict models refuse a missing list).
secrets = core.list_namespaced_secret("kube-public")
assert secrets.items == [], secrets

# Create, read, patch (strategic merge for a built-in kind), replace with a stale version.
body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py", labels={"from": "python"}), data={"a": "1"})
created = core.create_namespaced_config_map("default", body)
assert created.metadata.uid and created.metadata.resource_version
got = core.read_namespaced_config_map("py", "default")
assert got.data == {"a": "1"}, got.data
patched = core.patch_namespaced_config_map("py", "default", {"data": {"b": "2"}})
assert patched.data == {"a": "1", "b": "2"}, patched.data
try:
    core.replace_namespaced_config_map("py", "default", created)
    raise AssertionError("a stale replace must conflict")
except ApiException as error:
    assert error.status == 409, error
try:
    core.read_namespaced_config_map("missing", "default")
    raise AssertionError("reading a missing object must fail")
except ApiException as error:
    assert error.status == 404, error

# JSON patch with a list body.
core.patch_namespaced_config_map("py", "default", [{"op": "add", "path": "/data/c", "value": "3"}])
assert core.read_namespaced_config_map("py", "default").data["c"] == "3"

# Watch: sees a change made after it started.
seen = []


def watch_changes():
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_config_map, "default", label_selector="from=python", timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "MODIFIED":
            stream.stop()


thread = threading.Thread(target=watch_changes)
thread.start()
time.sleep(1)
core.patch_namespaced_config_map("py", "default", {"metadata": {"annotations": {"touched": "yes"}}})
thread.join(timeout=20)
assert ("ADDED", "py") in seen and ("MODIFIED", "py") in seen, seen

# A CRD and custom objects (merge patches), through the dynamic client's discovery too.
crd = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}
client.ApiextensionsV1Api().create_custom_resource_definition(crd)
custom = client.CustomObjectsApi()
custom.create_namespaced_custom_object("example.com", "v1", "default", "gizmos",
                                       {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}, "spec": {"n": 1}})
custom.patch_namespaced_custom_object("example.com", "v1", "default", "gizmos", "g", {"spec": {"n": 2}})
assert custom.get_namespaced_custom_object("example.com", "v1", "default", "gizmos", "g")["spec"]["n"] == 2

dyn = dynamic.DynamicClient(client.ApiClient())
gizmos = dyn.resources.get(api_version="example.com/v1", kind="Gizmo")
assert [g.metadata.name for g in gizmos.get(namespace="default").items] == ["g"]

core.delete_namespaced_config_map("py", "default")
print("PYTHON-CLIENT-OK")
