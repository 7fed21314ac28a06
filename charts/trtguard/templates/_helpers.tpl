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

{{/* "repository@sha256:…" when a digest is given, else "repository:tag". */}}
{{- define "trtguard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
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
{{- if and $v.buildJob.publish.reference (not $v.buildJob.publish.credentialsSecret) }}
{{- fail "buildJob.publish.reference needs buildJob.publish.credentialsSecret: a kubernetes.io/dockerconfigjson Secret that may push there" }}
{{- end }}
{{- if not (and $v.buildJob.signingKey.secretName $v.buildJob.passwordSecret.name) }}
{{- fail "buildJob.enabled needs buildJob.signingKey.secretName and buildJob.passwordSecret.name: the key that signs the build manifest and its password" }}
{{- end }}
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
  workingDir: /workspace
  env:
    {{- include "trtguard.buildEnv" (list $root $job) | nindent 4 }}
    - name: SIGNING_KEY
      value: /etc/trtguard/signing/{{ $job.signingKey.key }}
    - name: TRTGUARD_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ $job.passwordSecret.name }}
          key: {{ $job.passwordSecret.key }}
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
{{- end }}
