{{/* Names and labels shared by every template. */}}

{{- define "streamapp-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamapp-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "streamapp-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamapp-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "streamapp-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "streamapp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: streamapp
{{- end -}}

{{- define "streamapp-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "streamapp-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces watched in namespaced mode, as a JSON list (the release's own when none given). */}}
{{- define "streamapp-operator.watchNamespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- .Values.watchNamespaces | uniq | toJson -}}
{{- else -}}
{{- list .Release.Namespace | toJson -}}
{{- end -}}
{{- end -}}

{{/*
What the operator does through the API server. Kept next to the operator's code paths:
- streamapps: kopf lists/watches them and patches its progress annotations; the reconcile reads
  each app and merge-patches its status; owner references with blockOwnerDeletion need
  update on streamapps/finalizers where OwnerReferencesPermissionEnforcement is on.
- the driver's children (ServiceAccount, Role, RoleBinding, PVC, ConfigMap, Service): read,
  create-if-absent, merge-patch to converge.
- pods: kopf watches driver pods; the reconcile creates and deletes the driver.
- events: the reconcile and kopf post events on the StreamApp.
- secrets: get the one named by spec.kafka.secretRef (Kafka credentials for partition counts).
- The driver's Role (operator render/rbac.py DRIVER_RULES: pods only) can only be created by someone
  who holds every verb in it (RBAC escalation prevention), so those verbs are granted here too.
- The app's Spark authentication Secret and NetworkPolicy: _network.tpl.
*/}}
{{- define "streamapp-operator.rules" -}}
- apiGroups: ["streamapp.io"]
  resources: ["streamapps"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/status"]
  verbs: ["get", "patch"]
- apiGroups: ["streamapp.io"]
  resources: ["streamapps/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "patch", "delete", "deletecollection"]
- apiGroups: [""]
  resources: ["services", "configmaps", "persistentvolumeclaims"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create", "patch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "create", "patch"]
# each app's PodDisruptionBudget: no node scale-down or drain evicts its driver
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "create", "patch"]
# events: posted on StreamApps; listed (a checkpoint claim's, by field selector) to say why the claim
# of an app that is not running stays Pending.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "list"]
# Kafka client credentials named by spec.kafka.secretRef, to read partition counts, and the Secrets of
# Postgres sinks, checked (names and keys) before a driver that needs them starts: get only, never
# list or watch, so the operator sees no secret it was not pointed at.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
{{- end -}}

{{/* A Prometheus duration (30s, 10m, 1h) in seconds, for comparisons in PromQL. */}}
{{- define "streamapp-operator.seconds" -}}
{{- $d := toString . -}}
{{- $n := regexFind "^[0-9]+" $d | int -}}
{{- $u := trimPrefix (toString $n) $d -}}
{{- $f := dict "s" 1 "m" 60 "h" 3600 "d" 86400 -}}
{{- mul $n (get $f $u) -}}
{{- end -}}

{{/* An alert's runbook: (list .Values.prometheusRule "AlertName") -> "<runbookURL>#alertname", the
anchor GitHub and most Markdown renderers give the heading "## AlertName" of docs/runbooks.md. */}}
{{- define "streamapp-operator.runbook" -}}
{{- printf "%s#%s" (index . 0).runbookURL (lower (index . 1)) | quote -}}
{{- end -}}

{{/* "<image.registry>/<repository>" (no registry: the repository alone). */}}
{{- define "streamapp-operator.inRegistry" -}}
{{- $registry := trimSuffix "/" (index . 0) -}}
{{- if $registry }}{{ printf "%s/%s" $registry (index . 1) }}{{ else }}{{ index . 1 }}{{ end -}}
{{- end -}}

{{/* The operator's image. */}}
{{- define "streamapp-operator.image" -}}
{{- printf "%s:%s" (include "streamapp-operator.inRegistry" (list .Values.image.registry .Values.image.repository)) (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The image of StreamApps without spec.image: runtimeImage, else the runtime of this release (the operator's tag) in image.registry. */}}
{{- define "streamapp-operator.runtimeImage" -}}
{{- .Values.runtimeImage | default (printf "%s:%s" (include "streamapp-operator.inRegistry" (list .Values.image.registry "streamapp/runtime")) (.Values.image.tag | default .Chart.AppVersion)) -}}
{{- end -}}

{{/* The policy file: images default to the repository of the runtime image. */}}
{{- define "streamapp-operator.policy" -}}
{{- $images := .Values.policy.images | default (list (regexReplaceAll "[:@][^/]*$" (include "streamapp-operator.runtimeImage" .) "")) -}}
{{- toYaml (merge (dict "images" $images) (omit .Values.policy "images")) -}}
{{- end -}}
