{{/* Names, labels and the values every template shares. */}}

{{- define "trtguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "trtguard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "trtguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; the component label is added per object. */}}
{{- define "trtguard.labels" -}}
helm.sh/chart: {{ include "trtguard.chart" . }}
app.kubernetes.io/name: {{ include "trtguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trtguard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector of the webhook Pods (immutable once installed). */}}
{{- define "trtguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trtguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "trtguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "trtguard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
"repository@sha256:…"; "repository:tag" only with image.allowTag (trtguard.validate refuses the rest).
*/}}
{{- define "trtguard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else if .Values.image.allowTag }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- else }}
{{- fail "image.digest is required" }}
{{- end }}
{{- end }}

{{/* The Service's DNS names: the API server connects to <svc>.<ns>.svc; the others are for people. */}}
{{- define "trtguard.dnsNames" -}}
{{- $svc := include "trtguard.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson }}
{{- end }}

{{/* The Secret holding tls.crt and tls.key for the server. */}}
{{- define "trtguard.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "external" }}
{{- .Values.certificates.external.secretName }}
{{- else }}
{{- printf "%s-tls" (include "trtguard.fullname" .) }}
{{- end }}
{{- end }}

{{/*
Where the server reads its policies. Your files are mounted at site/ inside the image's policy folder, so that
one --policies directory holds the bundled library and them together.
*/}}
{{- define "trtguard.policiesPath" -}}
{{- if .Values.policies.includeLibrary -}}
/etc/trtguard/policies
{{- else -}}
/etc/trtguard/policies/site
{{- end }}
{{- end }}

{{/* True ("true") when any policy or trust file comes from values, a ConfigMap or a Secret (the site/ folder). */}}
{{- define "trtguard.hasSitePolicies" -}}
{{- with .Values }}
{{- if or .policies.documents .policies.existingConfigMap .trust.files .trust.existingSecret }}true{{ end }}
{{- end }}
{{- end }}

{{/* True ("true") when the chart renders its own policies ConfigMap (policy documents or trust files). */}}
{{- define "trtguard.hasPoliciesConfigMap" -}}
{{- if or .Values.policies.documents .Values.trust.files }}true{{ end }}
{{- end }}

{{/* True when the server gets a registry configuration file. */}}
{{- define "trtguard.hasRegistryConfig" -}}
{{- if or .Values.registry.credentialsSecret .Values.registry.config }}true{{ end }}
{{- end }}

{{- define "trtguard.decisionLogClaim" -}}
{{- default (printf "%s-decisions" (include "trtguard.fullname" .)) .Values.decisionLog.sqlite.persistence.existingClaim }}
{{- end }}

{{/*
Cross-field checks the JSON schema cannot phrase clearly. Each failure says what to change.
*/}}
{{- define "trtguard.validate" -}}
{{- $v := .Values }}
{{- if not (or $v.image.digest $v.image.allowTag) }}
{{- fail "image.digest is required: the sha256 digest that your build-and-push step reported for the trtguard image (chart README, \"Image digest\"), e.g. --set image.digest=sha256:… . trtguard refuses workloads that are not pinned by digest, and holds itself to that; to deploy by tag anyway (not for production), set image.allowTag=true" }}
{{- end }}
{{- if not (or $v.policies.includeLibrary (include "trtguard.hasSitePolicies" .)) }}
{{- fail "no policies: set policies.includeLibrary=true, or give policies.documents or policies.existingConfigMap" }}
{{- end }}
{{- if and $v.trust.existingSecret (not $v.trust.existingSecretKeys) }}
{{- fail "trust.existingSecret needs trust.existingSecretKeys: the keys of the Secret to place under keys/" }}
{{- end }}
{{- if and (eq $v.certificates.mode "external") (not $v.certificates.external.secretName) }}
{{- fail "certificates.mode=external needs certificates.external.secretName: a kubernetes.io/tls Secret (tls.crt, tls.key) in the release namespace" }}
{{- end }}
{{- if and (eq $v.certificates.mode "external") (not $v.certificates.external.caBundle) }}
{{- fail "certificates.mode=external needs certificates.external.caBundle: the PEM of the CA that signed the Secret's certificate" }}
{{- end }}
{{- if and (eq $v.decisionLog.type "postgresql") (not $v.decisionLog.postgresql.existingSecret) }}
{{- fail "decisionLog.type=postgresql needs decisionLog.postgresql.existingSecret: a Secret with the postgresql:// URL under decisionLog.postgresql.secretKey" }}
{{- end }}
{{- if and (eq $v.decisionLog.type "sqlite") $v.decisionLog.sqlite.persistence.enabled (gt (int $v.replicaCount) 1) }}
{{- fail "a SQLite decision log on a PersistentVolumeClaim serves one replica: set replicaCount=1, or use decisionLog.type=postgresql for several replicas" }}
{{- end }}
{{- if and $v.metrics.prometheusRule.enabled (not $v.metrics.enabled) }}
{{- fail "metrics.prometheusRule.enabled needs metrics.enabled=true: the alerts read the metrics Prometheus scrapes from the plain-HTTP metrics port" }}
{{- end }}
{{- if and $v.metrics.prometheusRule.enabled (eq $v.decisionLog.type "postgresql") (not $v.metrics.prometheusRule.decisionLog.capacity) }}
{{- fail "metrics.prometheusRule.enabled with decisionLog.type=postgresql needs metrics.prometheusRule.decisionLog.capacity (e.g. 50Gi): the space the decisions table may take, which only you know" }}
{{- end }}
{{- if and $v.metrics.serviceMonitor.enabled (not $v.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled=true: Prometheus scrapes the plain-HTTP metrics port" }}
{{- end }}
{{- if and $v.metrics.enabled (eq (int $v.metrics.port) (int $v.server.port)) }}
{{- fail "metrics.port must differ from server.port" }}
{{- end }}
{{- if ge (float64 $v.server.timeoutMargin) (divf $v.webhook.timeoutSeconds 2) }}
{{- fail (printf "server.timeoutMargin (%v s) must be less than half of webhook.timeoutSeconds (%v s): the margin is kept back from the API server's deadline, and the rest must be enough to judge a request" $v.server.timeoutMargin $v.webhook.timeoutSeconds) }}
{{- end }}
{{- range $host, $entry := dig "registries" dict ($v.registry.config | default dict) }}
{{- if and (kindIs "map" $entry) $entry.plain_http (not (regexMatch "^((localhost|127\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}|\\[::1\\])(:[0-9]+)?|::1)$" (lower $host))) }}
{{- fail (printf "registry.config.registries[%s].plain_http: plain HTTP is allowed only for loopback registries (localhost, 127.0.0.0/8, [::1]); trtguard serve refuses it for any other host" $host) }}
{{- end }}
{{- end }}
{{- if $v.verifierJob.enabled }}
{{- include "trtguard.validateJobImage" (list "verifierJob" $v.verifierJob.image) }}
{{- include "trtguard.validateOneOf" (list "verifierJob.artifacts" $v.verifierJob.artifacts) }}
{{- if eq (ne $v.verifierJob.verificationKey.configMap "") (ne $v.verifierJob.verificationKey.secret "") }}
{{- fail "verifierJob.verificationKey needs exactly one of configMap and secret: where the manifest signer's public key is" }}
{{- end }}
{{- if and $v.verifierJob.attestation.enabled (not (and $v.verifierJob.attestation.keySecret.name $v.verifierJob.attestation.passwordSecret.name)) }}
{{- fail "verifierJob.attestation.enabled needs attestation.keySecret.name and attestation.passwordSecret.name: the signing key and its password" }}
{{- end }}
{{- end }}
{{- if $v.buildJob.enabled }}
{{- include "trtguard.validateJobImage" (list "buildJob" $v.buildJob.image) }}
{{- include "trtguard.validateOneOf" (list "buildJob.inputs" $v.buildJob.inputs) }}
{{- if not $v.buildJob.auditId }}
{{- fail "buildJob.enabled needs buildJob.auditId: the audit ID recorded in the build manifest" }}
{{- end }}
{{- if not $v.buildJob.script }}
{{- fail "buildJob.enabled needs buildJob.script: the shell script that builds the engine into $ENGINE_PATH" }}
{{- end }}
{{- if and $v.buildJob.publish.reference $v.buildJob.networkPolicy.enabled (not $v.buildJob.networkPolicy.registry.cidrs) }}
{{- fail "buildJob.publish.reference needs buildJob.networkPolicy.registry.cidrs: the addresses of the registry it pushes to (the Job's NetworkPolicy allows no other egress)" }}
{{- end }}
{{- if and $v.buildJob.publish.reference (not $v.buildJob.publish.credentialsSecret) }}
{{- fail "buildJob.publish.reference needs buildJob.publish.credentialsSecret: a kubernetes.io/dockerconfigjson Secret that may push there" }}
{{- end }}
{{- if not (and $v.buildJob.signingKey.secretName $v.buildJob.passwordSecret.name) }}
{{- fail "buildJob.enabled needs buildJob.signingKey.secretName and buildJob.passwordSecret.name: the key that signs the build manifest and its password" }}
{{- end }}
{{- end }}
{{- end }}

{{/* A Kubernetes quantity of bytes (e.g. 4Gi, 500M, 1073741824) as a whole number of bytes. */}}
{{- define "trtguard.bytes" -}}
{{- $quantity := toString . }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $quantity }}
{{- $suffix := trimPrefix $number $quantity }}
{{- $factors := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- if or (not $number) (not (hasKey $factors $suffix)) }}
{{- fail (printf "%q is not a byte quantity such as 4Gi or 500M" $quantity) }}
{{- end }}
{{- printf "%.0f" (mulf (float64 $number) (get $factors $suffix)) }}
{{- end }}

{{/*
checkov skip annotations (checkov.io/skipN: "CHECK_ID=reason") for a list of [check id, reason] pairs. Every
finding the chart does not fix is skipped here, on the object it is about, with the reason; checkov splits the
value at "=", so a reason holds none.
*/}}
{{- define "trtguard.checkovSkips" -}}
{{- $lines := list }}
{{- range $index, $skip := . }}
{{- if contains "=" (index $skip 1) }}
{{- fail (printf "internal: the reason for skipping %s contains '='" (index $skip 0)) }}
{{- end }}
{{- $lines = append $lines (printf "checkov.io/skip%d: %s" (add1 $index) (printf "%s=%s" (index $skip 0) (index $skip 1) | quote)) }}
{{- end }}
{{- join "\n" $lines }}
{{- end }}

{{/*
The checks a workload of the chart does not pass on purpose, with the reason: a JSON list for
trtguard.checkovSkips. Arguments: the root context, whether a NetworkPolicy selects the Pods, and the value
that switches it. Only settings the operator chose are skipped, each naming the value that did it:
- securityContext.runAsUser null leaves the UID to the platform (OpenShift's restricted SCC assigns one from
  the namespace's range, above 1000000000), so CKV_K8S_40 (UID 10000 or more) cannot be shown in the manifest;
- a NetworkPolicy switched off (the cluster's own policies are then expected to cover the Pods): CKV2_K8S_6.
*/}}
{{- define "trtguard.podCheckovSkips" -}}
{{- $root := index . 0 }}
{{- $skips := list }}
{{- if kindIs "invalid" $root.Values.securityContext.runAsUser }}
{{- $skips = append $skips (list "CKV_K8S_40" "securityContext.runAsUser is null: the platform assigns the UID (OpenShift assigns one from the namespace range); runAsNonRoot is still enforced") }}
{{- end }}
{{- if not (index . 1) }}
{{- $skips = append $skips (list "CKV2_K8S_6" (printf "%s is false: the operator turned this chart's NetworkPolicy off, for the cluster's own policies to cover these Pods" (index . 2))) }}
{{- end }}
{{- toJson $skips }}
{{- end }}

{{/*
The NetworkPolicy of a Job's Pods (arguments: the root context, the component label, the Job's values): no
ingress at all, and egress only to DNS and the registry, and only once registry.cidrs names it.
*/}}
{{- define "trtguard.jobNetworkPolicy" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $policy := (index . 2).networkPolicy }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "trtguard.fullname" $root }}-{{ $component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "trtguard.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $component }}
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/instance: {{ $root.Release.Name }}
      app.kubernetes.io/component: {{ $component }}
  policyTypes: [Ingress, Egress]
  ingress: []
  {{- if $policy.registry.cidrs }}
  egress:
    - ports:
        {{- range $policy.dns.ports }}
        - port: {{ . }}
          protocol: UDP
        - port: {{ . }}
          protocol: TCP
        {{- end }}
      {{- with $policy.dns.to }}
      to:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    - to:
        {{- range $policy.registry.cidrs }}
        - ipBlock:
            cidr: {{ . }}
        {{- end }}
      ports:
        {{- range $policy.registry.ports }}
        - port: {{ . }}
          protocol: TCP
        {{- end }}
  {{- else }}
  egress: []
  {{- end }}
{{- end }}

{{- define "trtguard.validateJobImage" -}}
{{- $where := index . 0 }}
{{- $image := index . 1 }}
{{- if not (and $image.repository $image.digest) }}
{{- fail (printf "%s.enabled needs %s.image.repository and %s.image.digest (sha256:…): Jobs run only images pinned by digest" $where $where $where) }}
{{- end }}
{{- end }}

{{- define "trtguard.validateOneOf" -}}
{{- $where := index . 0 }}
{{- $source := index . 1 }}
{{- if eq (ne $source.imageReference "") (ne $source.persistentVolumeClaim "") }}
{{- fail (printf "%s needs exactly one of imageReference (an OCI artifact by digest) and persistentVolumeClaim" $where) }}
{{- end }}
{{- end }}

{{/* The restricted container security context (Pod Security Standards "restricted"). */}}
{{- define "trtguard.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The Pod security context; the UID/GID come from values (null leaves them to the platform). */}}
{{- define "trtguard.podSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.securityContext }}
{{- if not (kindIs "invalid" .runAsUser) }}
runAsUser: {{ .runAsUser }}
{{- end }}
{{- if not (kindIs "invalid" .runAsGroup) }}
runAsGroup: {{ .runAsGroup }}
{{- end }}
{{- if not (kindIs "invalid" .fsGroup) }}
fsGroup: {{ .fsGroup }}
{{- end }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* A name suffix that changes with a Job's values, so that a changed Job is a new Job (Job templates are immutable). */}}
{{- define "trtguard.jobSuffix" -}}
{{- . | toJson | sha256sum | trunc 10 }}
{{- end }}

{{/* Environment of every build Job step; manifestArgs and attestArgs refer to it as $(NAME). */}}
{{- define "trtguard.buildEnv" -}}
{{- $job := index . 1 -}}
- name: HOME
  value: /tmp
- name: INPUT_DIR
  value: /workspace/input
- name: OUTPUT_DIR
  value: /workspace/out
- name: ENGINE_PATH
  value: /workspace/out/{{ $job.engineName }}
- name: ONNX_PATH
  value: /workspace/input/{{ $job.onnxPath }}
- name: PREDICATE_PATH
  value: /workspace/out/{{ $job.engineName }}.predicate.json
- name: MANIFEST_PATH
  value: /workspace/out/{{ $job.engineName }}.manifest.dsse.json
- name: TOOLCHAIN_IMAGE
  value: {{ printf "%s@%s" $job.image.repository $job.image.digest | quote }}
- name: AUDIT_ID
  value: {{ $job.auditId | quote }}
{{- end }}

{{- define "trtguard.buildMounts" -}}
- name: tmp
  mountPath: /tmp
- name: inputs
  mountPath: /workspace/input
  readOnly: true
- name: out
  mountPath: /workspace/out
{{- end }}

{{/* The build Job's signing step: `trtguard attest` with the key and its password, and nothing else secret. */}}
{{- define "trtguard.buildSignStep" -}}
{{- $root := index . 0 -}}
{{- $job := index . 1 -}}
- name: sign
  image: {{ printf "%s@%s" $job.image.repository $job.image.digest | quote }}
  imagePullPolicy: {{ $job.image.pullPolicy }}
  command: [trtguard, attest]
  args:
    {{- range $job.attestArgs }}
    - {{ . | quote }}
    {{- end }}
    # The key's password, from its Secret mounted as a file (never an environment variable).
    - --password-file
    - /etc/trtguard/signing-password/password
  workingDir: /workspace
  env:
    {{- include "trtguard.buildEnv" (list $root $job) | nindent 4 }}
    - name: SIGNING_KEY
      value: /etc/trtguard/signing/{{ $job.signingKey.key }}
  {{- with $job.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "trtguard.containerSecurityContext" $root | nindent 4 }}
  volumeMounts:
    {{- include "trtguard.buildMounts" $root | nindent 4 }}
    - name: signing
      mountPath: /etc/trtguard/signing
      readOnly: true
    - name: signing-password
      mountPath: /etc/trtguard/signing-password
      readOnly: true
{{- end }}
