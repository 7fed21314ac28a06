"""Render every values scenario and check the objects: Kubernetes schemas, hardening, availability, wiring."""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.charts.helm_chart import (
    CHART,
    CUSTOM_KINDS,
    FULLNAME,
    KUBE_VERSIONS,
    NAMESPACE,
    SCENARIOS,
    containers,
    flags,
    install_notes,
    of_kind,
    one,
    pod_spec,
    render,
    render_error,
    scenario,
    webhook_container,
)

pytestmark = pytest.mark.helm


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_object_is_valid_for_kubernetes(name: str, kube_version: str) -> None:
    docs = scenario(name, kube_version)
    custom = set()
    for doc in docs:
        if doc["kind"] in CUSTOM_KINDS:
            custom.add(doc["kind"])
            continue
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{doc['kind']} {doc['metadata']['name']}: {error.message} at {list(error.path)}")
    assert custom <= CUSTOM_KINDS


CLUSTER_SCOPED = (
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ClusterRole",
    "ClusterRoleBinding",
)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_namespaced_objects_live_in_the_release_namespace(name: str) -> None:
    for doc in scenario(name):
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in doc["metadata"]
        else:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_rbac_and_no_api_token(name: str) -> None:
    # The cluster audit's own service account and read-only role are tested in test_chart_audit_cluster.py.
    docs = [
        d
        for d in scenario(name)
        if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "cluster-audit"
    ]
    assert not [d for d in docs if d["kind"] in {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}]
    for account in of_kind(docs, "ServiceAccount"):
        assert account["automountServiceAccountToken"] is False
    for workload in of_kind(docs, "Deployment") + of_kind(docs, "Job"):
        assert pod_spec(workload)["automountServiceAccountToken"] is False


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_pod_runs_restricted(name: str) -> None:
    docs = scenario(name)
    workloads = of_kind(docs, "Deployment") + of_kind(docs, "Job")
    assert workloads
    for workload in workloads:
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for forbidden in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(forbidden)
        assert not [v for v in spec["volumes"] if "hostPath" in v]
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        for container in containers(workload):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["privileged"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["runAsNonRoot"] is True
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}
            tmp = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert len(tmp) == 1 and "emptyDir" in volumes[tmp[0]["name"]], container["name"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_secrets_reach_containers_only_as_files(name: str) -> None:
    """An environment variable leaks into child processes, crash dumps and `kubectl describe` habits."""
    for workload in of_kind(scenario(name), "Deployment") + of_kind(scenario(name), "Job"):
        for container in containers(workload):
            for variable in container.get("env", []):
                assert "secretKeyRef" not in variable.get("valueFrom", {}), (container["name"], variable)
            assert not [e for e in container.get("envFrom", []) if "secretRef" in e], container["name"]


def test_default_uid_is_the_images_and_can_be_left_to_the_platform() -> None:
    context = pod_spec(one(scenario("defaults"), "Deployment"))["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (65532, 65532, 65532)
    context = pod_spec(one(scenario("existing-configmap"), "Deployment"))["securityContext"]
    assert "runAsUser" not in context and "fsGroup" not in context and context["runAsNonRoot"] is True


@pytest.mark.parametrize(("replicas", "expected"), [(1, False), (2, True), (3, True)])
def test_pod_disruption_budget_only_with_more_than_one_replica(replicas: int, expected: bool) -> None:
    docs = render(set_json={"replicaCount": replicas})
    budgets = of_kind(docs, "PodDisruptionBudget")
    assert bool(budgets) is expected
    if expected:
        deployment = one(docs, "Deployment")
        assert budgets[0]["spec"]["selector"] == deployment["spec"]["selector"]
        assert budgets[0]["spec"]["maxUnavailable"] == 1


def test_pod_disruption_budget_can_be_switched_off() -> None:
    assert not of_kind(render(set_json={"podDisruptionBudget.enabled": False}), "PodDisruptionBudget")


def test_deployment_defaults_for_availability() -> None:
    deployment = one(scenario("defaults"), "Deployment")
    spec = pod_spec(deployment)
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    preferred = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert preferred[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    spread = spec["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"]["matchLabels"] == selector
    resources = spec["containers"][0]["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"} and "memory" in resources["limits"]
    sleep = spec["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert 0 < sleep < spec["terminationGracePeriodSeconds"]
    assert all(
        value in deployment["spec"]["template"]["metadata"]["labels"].items() for value in selector.items()
    )


def test_required_anti_affinity_and_spread_off() -> None:
    spec = pod_spec(one(scenario("existing-configmap"), "Deployment"))
    assert "requiredDuringSchedulingIgnoredDuringExecution" in spec["affinity"]["podAntiAffinity"]
    assert "topologySpreadConstraints" not in spec


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_secrets_are_mounted_whole_so_renewals_propagate(name: str) -> None:
    for workload in of_kind(scenario(name), "Deployment") + of_kind(scenario(name), "Job"):
        for container in containers(workload):
            assert not [m for m in container["volumeMounts"] if "subPath" in m or "subPathExpr" in m]


def test_probes_use_https_on_the_serving_port_by_default() -> None:
    container = webhook_container(scenario("defaults"))
    assert [p["containerPort"] for p in container["ports"]] == [8443]
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}


def test_probes_move_to_the_plain_metrics_port_when_it_exists() -> None:
    docs = scenario("monitoring")
    container = webhook_container(docs)
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"https": 8443, "metrics": 9090}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTP"}
    assert flags(container["args"])["--metrics-port"] == "9090"


def test_service_port_443_reaches_container_port_8443() -> None:
    docs = scenario("defaults")
    service = one(docs, "Service")
    assert service["metadata"]["name"] == FULLNAME
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP", "appProtocol": "https"}
    ]
    assert service["spec"]["selector"] == one(docs, "Deployment")["spec"]["selector"]["matchLabels"]


def test_policy_change_rolls_the_pods() -> None:
    def annotations(document: str) -> dict[str, str]:
        docs = render(set_json={"policies.documents": {"site.yaml": document}})
        annotated: dict[str, str] = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return annotated

    first = annotations("# one\n")
    assert annotations("# one\n") == first
    second = annotations("# two\n")
    assert second["checksum/policies"] != first["checksum/policies"]
    assert second["checksum/registry"] == first["checksum/registry"]


def test_registry_config_change_rolls_the_pods() -> None:
    def checksum(read_seconds: int) -> str:
        docs = render(set_json={"registry.config": {"defaults": {"timeouts": {"read": read_seconds}}}})
        value: str = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"][
            "checksum/registry"
        ]
        return value

    assert checksum(5) != checksum(6)


def test_sqlite_decision_log_on_an_emptydir_by_default() -> None:
    docs = scenario("defaults")
    container = webhook_container(docs)
    assert flags(container["args"])["--decision-log"] == "sqlite:////var/lib/trtguard/decisions.db"
    volumes = {v["name"]: v for v in pod_spec(one(docs, "Deployment"))["volumes"]}
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/var/lib/trtguard")
    # Bounded: past the limit the kubelet evicts this Pod rather than the log filling the node's disk.
    assert volumes[mount["name"]]["emptyDir"] == {"sizeLimit": "4Gi"}
    assert not of_kind(docs, "PersistentVolumeClaim")


def test_sqlite_decision_log_on_a_kept_claim() -> None:
    docs = scenario("sqlite-pvc")
    claim = one(docs, "PersistentVolumeClaim")
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    deployment = one(docs, "Deployment")
    # A ReadWriteOnce claim cannot move to a surge Pod; Recreate is the only strategy that can roll.
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    volumes = {v["name"]: v for v in pod_spec(deployment)["volumes"]}
    assert volumes["decisions"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    existing = render(
        CHART / "ci" / "sqlite-pvc-values.yaml",
        set_json={"decisionLog.sqlite.persistence.existingClaim": "audit-log"},
    )
    assert not of_kind(existing, "PersistentVolumeClaim")
    volumes = {v["name"]: v for v in pod_spec(one(existing, "Deployment"))["volumes"]}
    assert volumes["decisions"]["persistentVolumeClaim"]["claimName"] == "audit-log"


def test_postgresql_url_only_from_the_secret_as_a_file() -> None:
    """The URL carries the database password: a mounted Secret file, never an environment variable."""
    docs = scenario("postgresql")
    container = webhook_container(docs)
    given = flags(container["args"])
    assert "--decision-log" not in given
    assert given["--decision-log-file"] == "/etc/trtguard/decision-log/url"
    assert "env" not in container
    volumes = {v["name"]: v for v in pod_spec(one(docs, "Deployment"))["volumes"]}
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/etc/trtguard/decision-log")
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["secret"] == {
        "secretName": "trtguard-decision-log",
        "defaultMode": 0o440,
        "items": [{"key": "url", "path": "url"}],
    }
    # The working directory stays writable (an emptyDir) under the read-only root filesystem.
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/var/lib/trtguard")
    assert volumes[mount["name"]] == {"name": mount["name"], "emptyDir": {}}


def test_network_policy_is_on_by_default_and_open_to_the_api_server() -> None:
    assert not of_kind(scenario("without-networkpolicy"), "NetworkPolicy")
    policy = one(scenario("defaults"), "NetworkPolicy")
    assert (
        policy["spec"]["podSelector"]["matchLabels"]
        == one(scenario("defaults"), "Deployment")["spec"]["selector"]["matchLabels"]
    )
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    # The API server's address cannot be predicted: no `from` means from anywhere, to the webhook port only.
    assert policy["spec"]["ingress"] == [{"ports": [{"port": "https", "protocol": "TCP"}]}]


def test_network_policy_with_peers_metrics_and_egress() -> None:
    monitoring = one(scenario("monitoring"), "NetworkPolicy")
    webhook_rule, metrics_rule = monitoring["spec"]["ingress"]
    assert webhook_rule["from"] == [{"ipBlock": {"cidr": "172.16.0.0/12"}}]
    assert metrics_rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert metrics_rule["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    egress = one(scenario("postgresql"), "NetworkPolicy")
    assert egress["spec"]["policyTypes"] == ["Ingress", "Egress"]
    dns, database = egress["spec"]["egress"]
    assert {p["port"] for p in dns["ports"]} == {53}
    assert {p["port"] for p in database["ports"]} == {5432, 443, 5000}


def test_service_monitor_scrapes_the_metrics_port_of_this_service() -> None:
    docs = scenario("monitoring")
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    selected = monitor["spec"]["selector"]["matchLabels"]
    assert selected.items() <= service["metadata"]["labels"].items()
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint == {
        "port": "metrics",
        "path": "/metrics",
        "scheme": "http",
        "interval": "15s",
        "scrapeTimeout": "5s",
    }
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}


PINNED_IMAGE = (
    "registry.example.com/trtguard/trtguard@"
    "sha256:0f4e3d2c1b0a99887766554433221100ffeeddccbbaa99887766554433221100"
)


@pytest.mark.parametrize("name", sorted(set(SCENARIOS) - {"allow-tag"}))
def test_the_webhook_image_is_pinned_by_digest(name: str) -> None:
    assert webhook_container(scenario(name))["image"] == PINNED_IMAGE


def test_without_a_digest_the_chart_refuses_to_render() -> None:
    """trtguard refuses workloads that are not pinned by digest; its own chart holds itself to that."""
    for values in ({"image.digest": ""}, {"image.digest": "", "image.tag": "0.1.0"}):
        error = render_error(set_json=values)
        assert "image.digest is required: the sha256 digest that your build-and-push step reported" in error
        assert '(chart README, "Image digest")' in error
        assert "set image.allowTag=true" in error
    # The digest wins over a tag, and over allowTag.
    docs = render(set_json={"image.tag": "latest", "image.allowTag": True})
    assert webhook_container(docs)["image"] == PINNED_IMAGE


def test_a_tag_only_with_the_explicit_override_and_a_loud_warning() -> None:
    assert webhook_container(scenario("allow-tag"))["image"] == "registry.example.com/trtguard/trtguard:0.1.0"
    docs = render(set_json={"image.digest": "", "image.allowTag": True, "image.tag": "0.1.0-rc1"})
    assert webhook_container(docs)["image"] == "registry.example.com/trtguard/trtguard:0.1.0-rc1"
    notes = install_notes(set_json={"image.digest": "", "image.allowTag": True})
    assert notes.startswith("#" * 40)
    flat = " ".join(notes.split())
    assert "WARNING: the webhook runs registry.example.com/trtguard/trtguard:0.1.0 BY TAG" in flat
    assert "Do not run this in production: set image.digest" in flat
    assert (
        "skopeo inspect --format '{{.Digest}}' docker://registry.example.com/trtguard/trtguard:0.1.0" in flat
    )
    # Pinned: no warning, and the notes name the digest.
    pinned = install_notes()
    assert "WARNING" not in pinned and f"Image: {PINNED_IMAGE} (pinned by digest" in pinned
