#!/usr/bin/env python3
"""Offline checks of deploy/kubernetes/ for tests/deploy/test_kube.

  kube_check.py discovery          serve a Kubernetes discovery API for Pod
                                   and Deployment on 127.0.0.1 (prints the
                                   port) until killed, so that kubectl's
                                   client-side dry run maps the kinds with no
                                   cluster
  kube_check.py crd SCHEMA FILE    validate a SandboxTemplate against the
                                   vendored CRD schema, strictly: a field the
                                   schema does not name is an error, as under
                                   the API server's strict field validation
  kube_check.py same POD FILE...   each FILE's pod spec is POD's
  kube_check.py rename POD NAME    POD named NAME, its volumes NAME-VOLUME
                                   (podman makes an emptyDir a volume of
                                   that name), on stdout
  kube_check.py probes POD CTR     the readiness and liveness probe commands
                                   of container CTR, a shell-quoted line each
"""
import http.server
import json
import shlex
import sys

import jsonschema
import yaml

DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
        "name": "apps",
        "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1",
                "resources": [{"name": "pods", "singularName": "pod",
                               "namespaced": True, "kind": "Pod",
                               "verbs": ["create", "get"]}]},
    "/apis/apps/v1": {"kind": "APIResourceList", "groupVersion": "apps/v1",
                      "resources": [{"name": "deployments",
                                     "singularName": "deployment",
                                     "namespaced": True, "kind": "Deployment",
                                     "verbs": ["create", "get"]}]},
}


class Discovery(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        doc = DISCOVERY.get(self.path.split("?")[0])
        body = json.dumps(doc if doc is not None else {}).encode()
        self.send_response(200 if doc is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def discovery():
    server = http.server.HTTPServer(("127.0.0.1", 0), Discovery)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def strict(schema):
    """The schema with additionalProperties false wherever an object names
    its properties and does not keep unknown fields: the API server prunes
    or (strict validation) refuses such fields, jsonschema would not."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def crd(schema_path, path):
    doc = load(path)
    if (doc.get("apiVersion") != "extensions.agents.x-k8s.io/v1beta1"
            or doc.get("kind") != "SandboxTemplate"):
        sys.exit(f"{path}: not an extensions.agents.x-k8s.io/v1beta1 "
                 "SandboxTemplate")
    validator = jsonschema.Draft7Validator(strict(load(schema_path)))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors:
        where = ".".join(str(p) for p in e.path) or "(top)"
        print(f"{path}: {where}: {e.message}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"{path}: valid against {schema_path}")


def pod_spec(doc):
    kind = doc.get("kind")
    if kind == "Pod":
        return doc["spec"]
    if kind == "Deployment":
        return doc["spec"]["template"]["spec"]
    if kind == "SandboxTemplate":
        return doc["spec"]["podTemplate"]["spec"]
    sys.exit(f"no pod spec in a {kind}")


def same(pod_path, paths):
    want = pod_spec(load(pod_path))
    differ = [p for p in paths if pod_spec(load(p)) != want]
    for p in differ:
        print(f"{p}: its pod spec is not {pod_path}'s", file=sys.stderr)
    if differ:
        sys.exit(1)
    print(f"{', '.join(paths)}: the pod spec of {pod_path}")


def rename(pod_path, name):
    doc = load(pod_path)
    doc["metadata"]["name"] = name
    spec = doc["spec"]
    for volume in spec["volumes"]:
        volume["name"] = f"{name}-{volume['name']}"
    for ctr in spec["containers"]:
        for mount in ctr["volumeMounts"]:
            mount["name"] = f"{name}-{mount['name']}"
    yaml.safe_dump(doc, sys.stdout, sort_keys=False)


def probes(pod_path, container):
    spec = pod_spec(load(pod_path))
    ctr, = [c for c in spec["containers"] if c["name"] == container]
    for kind in ("readinessProbe", "livenessProbe"):
        print(shlex.join(ctr[kind]["exec"]["command"]))


def main(argv):
    if argv[1:2] == ["discovery"]:
        discovery()
    elif argv[1:2] == ["crd"] and len(argv) == 4:
        crd(argv[2], argv[3])
    elif argv[1:2] == ["same"] and len(argv) >= 4:
        same(argv[2], argv[3:])
    elif argv[1:2] == ["rename"] and len(argv) == 4:
        rename(argv[2], argv[3])
    elif argv[1:2] == ["probes"] and len(argv) == 4:
        probes(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
