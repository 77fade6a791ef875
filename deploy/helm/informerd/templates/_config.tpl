{{- /*
The configuration informerd runs with: .Values.config, with the server addresses the pod
depends on (the socket in the mode's directory, the metrics port the probes call), node mode's
server defaults, and the mode's default resources when none are listed. The ConfigMap holds it
and the RBAC is derived from it, so both always describe the same configuration.
*/ -}}

{{- /* The directory of the socket, as the informerd container mounts it. */ -}}
{{- define "informerd.socketDir" -}}
{{- if eq (include "informerd.mode" .) "node" -}}
{{- .Values.node.socketDir | trimSuffix "/" -}}
{{- else -}}
/run/informerd
{{- end -}}
{{- end -}}

{{- define "informerd.socketPath" -}}
{{- printf "%s/informerd.sock" (include "informerd.socketDir" .) -}}
{{- end -}}

{{- /* The configuration as YAML (the ConfigMap's informerd.yaml). */ -}}
{{- define "informerd.config" -}}
{{- $mode := include "informerd.mode" . -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- $server := deepCopy ($config.server | default dict) -}}
{{- range $field, $from := dict "socket" "the mode (sidecar: /run/informerd, node: node.socketDir)" "metrics" "metricsPort" -}}
{{- if hasKey $server $field -}}
{{- fail (printf "config.server.%s: the chart sets it from %s, which the pod's mounts and probes follow; remove it" $field $from) -}}
{{- end -}}
{{- end -}}
{{- if eq $mode "node" -}}
{{- $server = mergeOverwrite (deepCopy .Values.node.server) $server -}}
{{- end -}}
{{- $_ := set $server "socket" (include "informerd.socketPath" .) -}}
{{- $_ := set $server "metrics" (printf "0.0.0.0:%v" .Values.metricsPort) -}}
{{- $_ := set $config "server" $server -}}
{{- if not $config.resources -}}
{{- $_ := set $config "resources" (include (printf "informerd.%s.defaultResources" $mode) . | fromYamlArray) -}}
{{- end -}}
{{- $_ := set $config "apiVersion" "informerd.io/v1alpha1" -}}
{{- $_ := set $config "kind" "Config" -}}
{{- toYaml $config -}}
{{- end -}}

{{- /* The sidecar's default: deploy/sidecar/informerd.yaml's pods, in the release's namespace. */ -}}
{{- define "informerd.sidecar.defaultResources" -}}
- name: pods
  apiVersion: v1
  kind: Pod
  namespaces: [{{ .Release.Namespace | quote }}]
  transform:
    keep: [metadata, spec.nodeName, status.phase, status.conditions, status.podIP]
    drop:
    - metadata.managedFields
    - metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
  indexes:
  - name: node
    path: spec.nodeName
{{- end -}}

{{- /* The node's default: deploy/node/informerd.yaml's pods of the node informerd runs on. */ -}}
{{- define "informerd.node.defaultResources" -}}
- name: pods
  apiVersion: v1
  kind: Pod
  fieldSelector: spec.nodeName=${NODE_NAME}
  transform:
    drop:
    - metadata.managedFields
    - metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]
{{- end -}}

{{- /* A pod annotation that changes with the configuration, so that a change rolls the pods. */ -}}
{{- define "informerd.configChecksum" -}}
checksum/informerd-config: {{ include "informerd.config" . | sha256sum }}
{{- end -}}
