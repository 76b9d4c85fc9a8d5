#!/usr/bin/python3
"""The manifests of deploy/epp/ (docs/epp.md, "On Kubernetes"): kvgate epp as the endpoint
picker of an InferencePool.

Checks, with Debian's python3-yaml and python3-jsonschema:
- the InferencePool against the InferencePool CRD's openAPIV3Schema, API version v1 of
  the Gateway API Inference Extension v1.0.0 (tests/deploy/inferencepool-v1.schema.json,
  where from: inferencepool-v1.schema.md), as the API server checks it: unknown fields
  refused (kubectl's strict field validation), and the CRD's one CEL rule (a Service
  needs a port); mistakes the schema must catch are tried too, so the check is seen to
  bite;
- that the manifests agree: the picker's Service and port are the Deployment's gRPC
  port and the config's epp.port; the probes ask the health names kvgate epp registers
  (src/epp/epp_server.cc) on the plaintext epp.health_port (epp.tls: the kubelet's gRPC
  probes speak no TLS); the discovery source reads the pool itself; the Deployment
  runs the ServiceAccount the Role binding gives pod LIST and WATCH; the HTTPRoute sends
  to the InferencePool;
- with KVGATE_BIN: the Deployment's subcommand exists, and `kvgate serve --check` accepts
  the ConfigMap's config (it reads the epp: section too). Kubernetes discovery reads its
  credentials at start, so for the check only its token, CA and namespace files are
  stand-ins and KUBERNETES_SERVICE_HOST is set; the rest is checked as written.

Run by ctest (entry `deploy_manifests`, label integration); by hand:
  KVGATE_BIN=build/kvgate /usr/bin/python3 tests/deploy/inferencepool_test.py
"""

import copy
import glob
import json
import os
import re
import subprocess
import tempfile
import unittest

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.join(ROOT, "deploy", "epp")
KVGATE = os.environ.get("KVGATE_BIN", "")
GROUP = "inference.networking.k8s.io"


def load_manifests():
    docs = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "*.yaml"))):
        with open(path) as f:
            for d in yaml.safe_load_all(f):
                if d:
                    d["_file"] = os.path.basename(path)
                    docs.append(d)
    return docs


def strict(schema):
    """The schema as the API server applies it with strict field validation: an object
    with `properties` and no `additionalProperties` takes no other field."""
    s = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node \
                    and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(s)
    return s


def pool_errors(pool, validator):
    """Every way `pool` fails the CRD: the schema's errors, then its CEL rule."""
    body = {k: v for k, v in pool.items() if k != "_file"}
    errors = [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
              for e in validator.iter_errors(body)]
    # x-kubernetes-validations on spec.endpointPickerRef (CEL, which JSON Schema cannot
    # say): self.kind != 'Service' || has(self.port), kind defaulting to Service.
    ref = body.get("spec", {}).get("endpointPickerRef")
    if isinstance(ref, dict) and ref.get("kind", "Service") == "Service" and "port" not in ref:
        errors.append("spec.endpointPickerRef: port is required when kind is 'Service' or "
                      "unspecified (defaults to 'Service')")
    return errors


class DeployManifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_manifests()
        with open(os.path.join(HERE, "inferencepool-v1.schema.json")) as f:
            cls.schema = json.load(f)
        cls.validator = jsonschema.Draft7Validator(strict(cls.schema))

    def one(self, kind, name=None, api=None):
        found = [d for d in self.docs if d.get("kind") == kind
                 and (name is None or d["metadata"]["name"] == name)
                 and (api is None or d.get("apiVersion") == api)]
        self.assertEqual(len(found), 1, f"expected one {kind} {name or ''} in deploy/epp/, "
                                        f"found {len(found)}")
        return found[0]

    def pool(self):
        return self.one("InferencePool", api=f"{GROUP}/v1")

    def epp_config(self):
        cm = self.one("ConfigMap", "kvgate-epp-config")
        return yaml.safe_load(cm["data"]["epp.yaml"])

    def deployment(self):
        return self.one("Deployment", "kvgate-epp")

    def container(self):
        containers = self.deployment()["spec"]["template"]["spec"]["containers"]
        self.assertEqual(len(containers), 1)
        return containers[0]

    # --- the InferencePool against the CRD --------------------------------------------

    def test_inferencepool_matches_the_crd_schema(self):
        self.assertEqual(pool_errors(self.pool(), self.validator), [])

    def test_the_schema_check_catches_mistakes(self):
        base = self.pool()
        mistakes = {
            "no targetPorts": lambda p: p["spec"].pop("targetPorts"),
            "no endpointPickerRef": lambda p: p["spec"].pop("endpointPickerRef"),
            "a port as a string": lambda p: p["spec"]["targetPorts"][0].update(number="8000"),
            "port 0": lambda p: p["spec"]["targetPorts"][0].update(number=0),
            "two target ports": lambda p: p["spec"]["targetPorts"].append({"number": 8001}),
            "the pre-v1 extensionRef": lambda p: p["spec"].update(
                extensionRef=p["spec"].pop("endpointPickerRef")),
            "a picker Service without a port": lambda p: p["spec"]["endpointPickerRef"].pop(
                "port"),
            "an unknown failure mode": lambda p: p["spec"]["endpointPickerRef"].update(
                failureMode="Open"),
            "a selector with matchExpressions": lambda p: p["spec"]["selector"].update(
                matchExpressions=[]),
            "no spec": lambda p: p.pop("spec"),
        }
        for what, change in mistakes.items():
            p = copy.deepcopy(base)
            change(p)
            self.assertNotEqual(pool_errors(p, self.validator), [], f"not caught: {what}")

    # --- the manifests agree with each other and with kvgate ------------------------

    def test_picker_service_port_and_config_agree(self):
        ref = self.pool()["spec"]["endpointPickerRef"]
        self.assertEqual(ref.get("kind", "Service"), "Service")
        self.assertIn(ref.get("group", ""), ("", None))
        service = self.one("Service", ref["name"])
        port = [p for p in service["spec"]["ports"] if p["port"] == ref["port"]["number"]]
        self.assertEqual(len(port), 1, "the Service has no port endpointPickerRef names")
        container = self.container()
        target = port[0].get("targetPort", port[0]["port"])
        cports = {p.get("name"): p["containerPort"] for p in container["ports"]}
        grpc_port = cports[target] if isinstance(target, str) else target
        self.assertIn(grpc_port, cports.values())
        self.assertEqual(self.epp_config()["epp"]["port"], grpc_port,
                         "epp.port is not the port the Service sends to")
        labels = self.deployment()["spec"]["template"]["metadata"]["labels"]
        for k, v in service["spec"]["selector"].items():
            self.assertEqual(labels.get(k), v, "the Service does not select the pods")
        for k, v in self.deployment()["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(labels.get(k), v)

    def test_probes_ask_the_health_names_the_epp_registers(self):
        with open(os.path.join(ROOT, "src", "epp", "epp_server.cc")) as f:
            src = f.read()
        m = re.search(r"kHealthNames\[\]\s*=\s*\{([^}]*)\}", src)
        self.assertIsNotNone(m, "kHealthNames not found in src/epp/epp_server.cc")
        names = re.findall(r'"([^"]*)"', m.group(1))
        container = self.container()
        epp = self.epp_config()["epp"]
        # The kubelet's gRPC probes speak no TLS: with epp.tls they must ask the plaintext
        # health port.
        probe_port = epp.get("health_port", epp["port"])
        if "tls" in epp:
            self.assertIn("health_port", epp, "epp.tls without a health_port for the probes")
        self.assertIn(probe_port, [p["containerPort"] for p in container["ports"]])
        for probe, want in (("livenessProbe", "liveness"), ("readinessProbe", "readiness")):
            g = container[probe]["grpc"]
            self.assertEqual(g["port"], probe_port, probe)
            self.assertEqual(g["service"], want, probe)
            self.assertIn(g["service"], names, f"{probe}: kvgate epp registers {names}")

    def test_discovery_source_is_the_pool(self):
        pools = self.epp_config()["pools"]
        sources = [s for p in pools.values() for s in p.get("discovery", {}).get("sources", [])
                   if s.get("kind") == "kubernetes"]
        self.assertEqual(len(sources), 1, "one kubernetes discovery source expected")
        s = sources[0]
        # The source reads the InferencePool itself: its selector and ports, not copies.
        self.assertEqual(s.get("inference_pool"), self.pool()["metadata"]["name"])
        for copied in ("selector", "port_name", "service"):
            self.assertNotIn(copied, s, f"{copied}: the pool's own spec gives it")
        self.assertTrue(self.pool()["spec"]["targetPorts"])

    def test_service_account_may_list_and_watch_pods(self):
        pod = self.deployment()["spec"]["template"]["spec"]
        account = pod["serviceAccountName"]
        self.one("ServiceAccount", account)
        bindings = [b for b in self.docs if b.get("kind") == "RoleBinding"
                    and any(s.get("kind") == "ServiceAccount" and s.get("name") == account
                            for s in b.get("subjects", []))]
        self.assertTrue(bindings, f"no RoleBinding for {account}")

        def granted(group, resource):
            """The verbs the bound roles grant on `resource` of API group `group`."""
            out = set()
            for b in bindings:
                role = self.one(b["roleRef"]["kind"], b["roleRef"]["name"])
                for rule in role["rules"]:
                    if group in rule["apiGroups"] and resource in rule["resources"]:
                        out.update(rule["verbs"])
            return out

        verbs = granted("", "pods")
        self.assertTrue({"list", "watch"} <= verbs, f"pods: {sorted(verbs)}")
        pool_verbs = granted("inference.networking.k8s.io", "inferencepools")
        self.assertTrue({"get", "watch"} <= pool_verbs, f"inferencepools: {sorted(pool_verbs)}")
        writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
        self.assertFalse((verbs | pool_verbs) & writes, "discovery never writes")

    def test_httproute_sends_to_the_pool(self):
        route = self.one("HTTPRoute")
        refs = [r for rule in route["spec"]["rules"] for r in rule.get("backendRefs", [])]
        self.assertTrue(any(r.get("group") == GROUP and r.get("kind") == "InferencePool"
                            and r.get("name") == self.pool()["metadata"]["name"]
                            for r in refs), refs)

    def test_deployment_reads_the_configmap(self):
        container = self.container()
        args = container["args"]
        self.assertEqual(args[0], "epp")
        config_path = args[1]
        pod = self.deployment()["spec"]["template"]["spec"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        found = False
        for name, path in mounts.items():
            cm = volumes[name].get("configMap")
            if cm and os.path.dirname(config_path) == path.rstrip("/"):
                data = self.one("ConfigMap", cm["name"])["data"]
                self.assertIn(os.path.basename(config_path), data)
                found = True
        self.assertTrue(found, f"{config_path} is not a mounted ConfigMap key")

    # --- kvgate reads it --------------------------------------------------------------

    @unittest.skipUnless(KVGATE, "KVGATE_BIN not set")
    def test_subcommand_exists(self):
        sub = self.container()["args"][0]
        r = subprocess.run([KVGATE, sub, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    @unittest.skipUnless(KVGATE, "KVGATE_BIN not set")
    def test_serve_check_accepts_the_config(self):
        config = self.epp_config()
        with tempfile.TemporaryDirectory(prefix="kvgate-deploy-") as d:
            for name, text in (("token", "stand-in\n"), ("ca.crt", "stand-in\n"),
                               ("namespace", "llm\n")):
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            for p in config["pools"].values():
                for s in p.get("discovery", {}).get("sources", []):
                    if s.get("kind") == "kubernetes":
                        self.assertNotIn("kubeconfig", s)
                        s["token_file"] = os.path.join(d, "token")
                        s["ca_file"] = os.path.join(d, "ca.crt")
                        s["namespace_file"] = os.path.join(d, "namespace")
            path = os.path.join(d, "epp.yaml")
            with open(path, "w") as f:
                yaml.safe_dump(config, f)
            env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1",
                       KUBERNETES_SERVICE_PORT="6443")
            r = subprocess.run([KVGATE, "serve", "--check", path], capture_output=True,
                               text=True, timeout=60, env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(": ok (", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
