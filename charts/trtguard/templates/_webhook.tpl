{{- /*
The body of a webhook entry (everything after its name), shared by the ValidatingWebhookConfiguration and the
MutatingWebhookConfiguration so that both see the same requests: the same namespace exclusions, match
conditions and rules. Called with a dict: root (the chart's context), path, failurePolicy, caBundle, excluded.
*/}}
{{- define "trtguard.webhookBody" -}}
{{- $root := .root }}
{{- $path := .path }}
{{- $failurePolicy := .failurePolicy }}
{{- $caBundle := .caBundle }}
{{- $excluded := .excluded }}
{{- $fullname := include "trtguard.fullname" $root }}
    admissionReviewVersions: [v1]
    # Dry-run requests get the same verdict as real ones, and are recorded as dry runs.
    sideEffects: None
    failurePolicy: {{ $failurePolicy }}
    matchPolicy: Equivalent
    timeoutSeconds: {{ $root.Values.webhook.timeoutSeconds }}
    clientConfig:
      service:
        namespace: {{ $root.Release.Namespace }}
        name: {{ $fullname }}
        # The API server appends ?timeout=Ns; the server keeps its answer inside it.
        path: {{ $path }}
        port: {{ $root.Values.service.port }}
      {{- if $caBundle }}
      caBundle: {{ $caBundle }}
      {{- end }}
    namespaceSelector:
      matchExpressions:
        # Never the webhook's own namespace (its Pods must start while it is down) nor kube-system. The
        # kubernetes.io/metadata.name label is set by the control plane and cannot be changed by users.
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values:
            {{- toYaml $excluded | nindent 12 }}
        {{- with $root.Values.webhook.namespaceSelector.matchExpressions }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $root.Values.webhook.namespaceSelector.matchLabels }}
      matchLabels:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    {{- with $root.Values.webhook.matchConditions }}
    matchConditions:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    rules:
      - apiGroups: [""]
        apiVersions: [v1]
        # Subresources are never matched implicitly: `kubectl debug` adds containers through
        # pods/ephemeralcontainers.
        resources: [pods, pods/ephemeralcontainers, replicationcontrollers]
        operations: [CREATE, UPDATE]
        scope: Namespaced
      - apiGroups: [apps]
        apiVersions: [v1]
        resources: [deployments, replicasets, statefulsets, daemonsets]
        operations: [CREATE, UPDATE]
        scope: Namespaced
      - apiGroups: [batch]
        apiVersions: [v1]
        resources: [jobs, cronjobs]
        operations: [CREATE, UPDATE]
        scope: Namespaced
      {{- /* The custom resources of the enabled operators (their Pods are judged anyway: this judges the
      resource itself, before the operator acts on it). */}}
      {{- $operatorKinds := include "trtguard.operatorKinds" $root | fromYaml }}
      {{- range $operator := $root.Values.webhook.operators }}
      {{- range $kind := index $operatorKinds $operator }}
      - apiGroups: [{{ $kind.group }}]
        apiVersions: {{ toJson $kind.versions }}
        resources: [{{ $kind.resource }}]
        operations: [CREATE, UPDATE]
        scope: {{ $kind.scope | default "Namespaced" }}
      {{- end }}
      {{- end }}
      {{- range $root.Values.webhook.extraRules }}
      - apiGroups: {{ toJson .apiGroups }}
        apiVersions: {{ toJson .apiVersions }}
        resources: {{ toJson .resources }}
        operations: [CREATE, UPDATE]
        scope: {{ .scope | default "Namespaced" }}
      {{- end }}
{{- end }}
