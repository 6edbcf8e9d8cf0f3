{{/*
The drivers' Spark UI (docs/operator.md, "Spark UI"); kept apart from _helpers.tpl. The operator's
rule for the Ingress it makes per app with ui.ingress.enabled (granted whether or not that is on, so
that turning it on needs no new RBAC).
*/}}
{{- define "streamapp-operator.uiRules" -}}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "create", "patch"]
{{- end -}}

{{/* The operator's flags for the Spark UI (ui), one list item each. */}}
{{- define "streamapp-operator.uiArgs" -}}
{{- with .Values.ui }}
{{- if not .enabled }}
- --no-spark-ui
{{- end }}
{{- if .ingress.enabled }}
- {{ printf "--spark-ui-ingress-host=%s" (required "ui.ingress.host is required with ui.ingress.enabled" .ingress.host) | quote }}
{{- with .ingress.className }}
- {{ printf "--spark-ui-ingress-class=%s" . | quote }}
{{- end }}
{{- range $key, $value := .ingress.annotations }}
- {{ printf "--spark-ui-ingress-annotation=%s=%s" $key (toString $value) | quote }}
{{- end }}
{{- with .ingress.tlsSecretName }}
- {{ printf "--spark-ui-ingress-tls-secret=%s" . | quote }}
{{- end }}
{{- end }}
{{- if and $.Values.appNetworkPolicies.enabled .networkPolicyNamespaceSelector }}
- --network-policy-ui-from={{ include "streamapp-operator.labelList" .networkPolicyNamespaceSelector }}
{{- end }}
{{- end }}
{{- end -}}
