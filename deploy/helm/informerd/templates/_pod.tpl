{{- /*
The informerd container and the volumes it needs, as deploy/sidecar and deploy/node run them.
The informerd.sidecar.* templates are the chart's interface for a controller's own chart, which
depends on this one and includes them in its pod spec with this chart's context
(`.Subcharts.informerd`); README.md shows where each goes.

Decision: the pod's volumes are named informerd-socket and informerd-config, not deploy/'s
socket and config, so that they cannot collide with the volumes of the pod they join.
*/ -}}

{{- /* The fields both modes' informerd container shares, after its name. */ -}}
{{- define "informerd.container.common" -}}
image: {{ include "informerd.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
args: [serve, --config, /etc/informerd/informerd.yaml]
ports:
- name: metrics
  containerPort: {{ .Values.metricsPort }}
startupProbe:
  {{- toYaml .Values.probes.startup | nindent 2 }}
livenessProbe:
  {{- toYaml .Values.probes.liveness | nindent 2 }}
readinessProbe:
  {{- toYaml .Values.probes.readiness | nindent 2 }}
{{- end -}}

{{- define "informerd.container.env" -}}
- name: RUST_LOG
  value: {{ .Values.logLevel | quote }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "informerd.container.mounts" -}}
- name: informerd-socket
  mountPath: {{ include "informerd.socketDir" . }}
- name: informerd-config
  mountPath: /etc/informerd
  readOnly: true
{{- end -}}

{{- define "informerd.configVolume" -}}
- name: informerd-config
  configMap:
    name: {{ include "informerd.fullname" . }}
{{- end -}}

{{- /*
informerd as a native sidecar: one item of the pod's initContainers (an init container with
restartPolicy: Always, which the kubelet starts and probes before the other containers and
stops after them).
*/ -}}
{{- define "informerd.sidecar.container" -}}
{{- if ne (include "informerd.mode" .) "sidecar" -}}
{{- fail "informerd.sidecar.container is for mode: sidecar; set informerd.mode to sidecar in the chart that includes it" -}}
{{- end -}}
- name: informerd
  {{- include "informerd.container.common" . | nindent 2 }}
  restartPolicy: Always
  env:
  {{- include "informerd.container.env" . | nindent 2 }}
  resources:
    {{- toYaml .Values.sidecar.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.sidecar.securityContext | nindent 4 }}
  volumeMounts:
  {{- include "informerd.container.mounts" . | nindent 2 }}
{{- end -}}

{{- /* The pod's volumes for the sidecar: the socket's emptyDir and the configuration. */ -}}
{{- define "informerd.sidecar.volumes" -}}
- name: informerd-socket
  emptyDir: {}
{{ include "informerd.configVolume" . }}
{{- end -}}

{{- /* For the controller's container: where the clients find the socket ($INFORMERD_SOCKET). */ -}}
{{- define "informerd.sidecar.env" -}}
- name: INFORMERD_SOCKET
  value: {{ include "informerd.socketPath" . }}
{{- end -}}

{{- /* For the controller's container: the socket's directory. */ -}}
{{- define "informerd.sidecar.volumeMounts" -}}
- name: informerd-socket
  mountPath: {{ include "informerd.socketDir" . }}
{{- end -}}

{{- /* The pod's annotations: a checksum of the configuration, so that a change rolls it. */ -}}
{{- define "informerd.sidecar.podAnnotations" -}}
{{ include "informerd.configChecksum" . }}
{{- end -}}

{{- /* A pod securityContext the sidecar works in (sidecar.podSecurityContext). */ -}}
{{- define "informerd.sidecar.podSecurityContext" -}}
{{ toYaml .Values.sidecar.podSecurityContext }}
{{- end -}}
