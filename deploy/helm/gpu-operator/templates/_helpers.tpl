{{/*
Names. Every object of the chart has a fixed name (gpu-operator, as in
NVIDIA's chart), so the operator, the hooks and users find them whatever the
release is called; nameOverride and fullnameOverride change label values only.
*/}}
{{- define "gpu-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The operand pods' app.kubernetes.io/managed-by value. */}}
{{- define "gpu-operator.operandManager" -}}
{{- default (include "gpu-operator.name" .) .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels of every object of the chart (NVIDIA's set), then operator.labels. */}}
{{- define "gpu-operator.labels" -}}
app.kubernetes.io/name: {{ include "gpu-operator.name" . }}
helm.sh/chart: {{ include "gpu-operator.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.operator.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The operator pod's selector. */}}
{{- define "gpu-operator.selectorLabels" -}}
app.kubernetes.io/component: "gpu-operator"
app: "gpu-operator"
{{- end -}}

{{/*
An image reference from repository, image and version, as the operator joins
them: repository/image:version, repository/image@sha256:... for a digest, or
image alone when it is a full reference. Call with (list repo image version).
*/}}
{{- define "gpu-operator.imageRef" -}}
{{- $repo := index . 0 -}}
{{- $image := index . 1 -}}
{{- $version := index . 2 | default "" | toString -}}
{{- $ref := $image -}}
{{- if $repo -}}
{{- $ref = printf "%s/%s" $repo $image -}}
{{- end -}}
{{- if not $version -}}
{{- $ref -}}
{{- else if hasPrefix "sha256:" $version -}}
{{- printf "%s@%s" $ref $version -}}
{{- else -}}
{{- printf "%s:%s" $ref $version -}}
{{- end -}}
{{- end -}}

{{/* gpuop's image: operator.repository/image, version defaulting to appVersion. */}}
{{- define "gpu-operator.image" -}}
{{- $op := .Values.operator -}}
{{- include "gpu-operator.imageRef" (list $op.repository $op.image (default .Chart.AppVersion $op.version)) -}}
{{- end -}}

{{/* imagePullSecrets (a list of names) as a pod spec's list of references. */}}
{{- define "gpu-operator.pullSecrets" -}}
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end -}}

{{/*
The fields every operand block writes to the ClusterPolicy (NVIDIA's rules):
repository, image, imagePullPolicy if set; version quoted if set;
imagePullSecrets, resources, env, args as given if set; hostNetwork if true.
Call with (dict "v" <block> "without" (list <keys to skip>)).
*/}}
{{- define "gpu-operator.operandFields" -}}
{{- $v := .v -}}
{{- $without := default (list) .without -}}
{{- range $key := list "repository" "image" "version" "imagePullPolicy" }}
{{- if and (get $v $key) (not (has $key $without)) }}
{{- if eq $key "version" }}
version: {{ get $v $key | toString | quote }}
{{- else }}
{{ $key }}: {{ get $v $key }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key := list "imagePullSecrets" "resources" "env" "args" }}
{{- if and (get $v $key) (not (has $key $without)) }}
{{ $key }}: {{- toYaml (get $v $key) | nindent 2 }}
{{- end }}
{{- end }}
{{- if and $v.hostNetwork (not (has "hostNetwork" $without)) }}
hostNetwork: true
{{- end }}
{{- end -}}

{{/* Hook Jobs' pod settings shared with the operator: pull secrets, placement. */}}
{{- define "gpu-operator.hookPodSettings" -}}
{{- with .Values.operator.imagePullSecrets }}
imagePullSecrets: {{- include "gpu-operator.pullSecrets" . | nindent 2 }}
{{- end }}
{{- with .Values.operator.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.operator.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The container security context of the operator and the hook Jobs. */}}
{{- define "gpu-operator.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
