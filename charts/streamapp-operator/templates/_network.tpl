{{/*
Spark traffic and network policies (docs/operator.md, "Spark traffic and network"); kept apart from
_helpers.tpl. The operator's rules for what it makes per app besides the driver's children:
- secrets: create the app's Spark authentication Secret <app>-spark-auth (create only, never patched;
  reading it back is the "get" the operator already holds for spec.kafka.secretRef);
- networkpolicies: read, create-if-absent and converge each app's NetworkPolicy (--network-policies;
  granted whether or not that is on, so that turning it on needs no new RBAC).
*/}}
{{- define "streamapp-operator.networkRules" -}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "create", "patch"]
{{- end -}}

{{/* The operator's flags for the per-app NetworkPolicy (appNetworkPolicies), one list item each. */}}
{{- define "streamapp-operator.networkPolicyArgs" -}}
{{- with .Values.appNetworkPolicies }}
{{- if .enabled }}
- --network-policies
- --network-policy-egress={{ join "," .egressPorts }}
{{- with .egressCidrs }}
- --network-policy-egress-cidrs={{ join "," . }}
{{- end }}
{{- with .metricsNamespaceSelector }}
- --network-policy-metrics-from={{ include "streamapp-operator.labelList" . }}
{{- end }}
- --network-policy-operator={{ $.Release.Namespace }}/app.kubernetes.io/name={{ include "streamapp-operator.name" $ }},app.kubernetes.io/instance={{ $.Release.Name }}
{{- end }}
{{- end }}
{{- end -}}

{{/* matchLabels as k=v,k=v (sorted by key). */}}
{{- define "streamapp-operator.labelList" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* "53/UDP", "443", "9092-9098" as NetworkPolicy ports. */}}
{{- define "streamapp-operator.policyPorts" -}}
{{- range . }}
{{- $p := toString . }}
{{- $range := regexFind "^[0-9]+(-[0-9]+)?" $p }}
- protocol: {{ regexFind "(TCP|UDP|SCTP)$" (upper $p) | default "TCP" }}
  port: {{ regexFind "^[0-9]+" $range }}
  {{- if contains "-" $range }}
  endPort: {{ trimPrefix "-" (regexFind "-[0-9]+" $range) }}
  {{- end }}
{{- end }}
{{- end -}}
