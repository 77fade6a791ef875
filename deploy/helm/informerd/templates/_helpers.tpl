{{- /*
Names, labels and the mode: what every template of the chart shares.
*/ -}}

{{- /* The mode, refused unless it is one the chart renders. */ -}}
{{- define "informerd.mode" -}}
{{- $mode := .Values.mode | toString -}}
{{- if not (has $mode (list "sidecar" "node")) -}}
{{- fail (printf "mode: %q is not a mode of this chart: use sidecar (informerd in a controller's pod) or node (a DaemonSet, one informerd per node); a service mode does not exist yet" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{- define "informerd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- /* The name of every RBAC object (informerd rbac's --name). */ -}}
{{- define "informerd.rbacName" -}}
{{- .Values.rbac.name | default (include "informerd.fullname" .) -}}
{{- end -}}

{{- /* The ServiceAccount informerd runs as: the one the RBAC is bound to. */ -}}
{{- define "informerd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "informerd.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- /*
Decision: app.kubernetes.io/name is informerd on every object, the label `informerd rbac`
puts on the RBAC it prints, so that one selector finds informerd's objects however installed.
*/ -}}
{{- define "informerd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "informerd.labels" -}}
{{ include "informerd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /* labels, and annotations when there are any, of an object's metadata. */ -}}
{{- define "informerd.metadata" -}}
labels:
  {{- include "informerd.labels" . | nindent 2 }}
{{- with .Values.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "informerd.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
