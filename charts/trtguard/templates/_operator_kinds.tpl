{{- /*
The custom resources of the operators whose kinds trtguard ships (policies/workload_model/_operator_kinds.py), by the name
webhook.operators uses: group, plural resource, the API versions trtguard reads, and scope. A version
trtguard does not read is not registered: with matchPolicy Equivalent the API server sends such a request
converted to a registered version where the CRD converts, and otherwise not at all.
tests/charts/test_chart_webhook.py holds this list against the shipped definitions.
*/}}
{{- define "trtguard.operatorKinds" -}}
kserve:
  - {group: serving.kserve.io, resource: inferenceservices, versions: [v1beta1]}
  - {group: serving.kserve.io, resource: servingruntimes, versions: [v1alpha1]}
  - {group: serving.kserve.io, resource: clusterservingruntimes, versions: [v1alpha1], scope: Cluster}
kuberay:
  - {group: ray.io, resource: rayclusters, versions: [v1, v1alpha1]}
  - {group: ray.io, resource: rayservices, versions: [v1, v1alpha1]}
  - {group: ray.io, resource: rayjobs, versions: [v1, v1alpha1]}
  - {group: ray.io, resource: raycronjobs, versions: [v1]}
leaderworkerset:
  - {group: leaderworkerset.x-k8s.io, resource: leaderworkersets, versions: [v1]}
argo-rollouts:
  - {group: argoproj.io, resource: rollouts, versions: [v1alpha1]}
kubeflow:
  - {group: kubeflow.org, resource: mpijobs, versions: [v2beta1, v1]}
  - {group: kubeflow.org, resource: pytorchjobs, versions: [v1]}
  - {group: kubeflow.org, resource: tfjobs, versions: [v1]}
  - {group: kubeflow.org, resource: notebooks, versions: [v1, v1beta1, v1alpha1]}
volcano:
  - {group: batch.volcano.sh, resource: jobs, versions: [v1alpha1]}
  - {group: batch.volcano.sh, resource: cronjobs, versions: [v1alpha1]}
{{- end }}
