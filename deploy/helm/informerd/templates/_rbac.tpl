{{- /*
The rules the configuration needs, derived as `informerd rbac` derives them (src/rbac/): list
and watch on each configured resource, in a Role per listed namespace, or in the ClusterRole for
all namespaces, cluster-scoped kinds and namespaceSelector (which also watches Namespaces); the
same for onDemand.allow (a group without kinds is `*` of that group); create on tokenreviews and
subjectaccessreviews with server.authorization kubernetes.

Decision: a kind is named by its plural from kinds.yaml (informerd's table of built-in kinds) or
rbac.kinds (custom resources), never guessed from the kind: a wrong plural is a rule that grants
nothing, and a template cannot ask the cluster's discovery as `informerd rbac --kubeconfig` does.
*/ -}}

{{- /* The plural and scope of kind `kind` of `group` (a dict: root, group, kind, field). */ -}}
{{- define "informerd.rbac.kind" -}}
{{- $kinds := merge (dict) .root.Values.rbac.kinds (.root.Files.Get "kinds.yaml" | fromYaml).kinds -}}
{{- $key := .kind -}}
{{- if .group -}}
{{- $key = printf "%s.%s" .kind .group -}}
{{- end -}}
{{- if not (hasKey $kinds $key) -}}
{{- fail (printf "%s: %s is not a built-in Kubernetes kind, so the chart does not know its plural and scope: add it to rbac.kinds as `%s: {plural: PLURAL, namespaced: true|false}` (its CRD's spec.names.plural and spec.scope)" .field $key $key) -}}
{{- end -}}
{{- toYaml (index $kinds $key) -}}
{{- end -}}

{{- /* Adds list and watch on `plural` of `group` to `rules` (API group → set of plurals). */ -}}
{{- define "informerd.rbac.grant" -}}
{{- $plurals := get .rules .group | default dict -}}
{{- $_ := set $plurals .plural true -}}
{{- $_ := set .rules .group $plurals -}}
{{- end -}}

{{- /*
The rules as YAML: `cluster` (API group → plurals) for the ClusterRole, `namespaces`
(namespace → API group → plurals) for the Roles, `reviews` for the review rules.
*/ -}}
{{- define "informerd.rbac.rules" -}}
{{- $root := . -}}
{{- $config := include "informerd.config" . | fromYaml -}}
{{- $cluster := dict -}}
{{- $namespaced := dict -}}
{{- range $i, $r := $config.resources -}}
{{- $group := "" -}}
{{- if contains "/" (toString $r.apiVersion) -}}
{{- $group = splitList "/" $r.apiVersion | first -}}
{{- end -}}
{{- $field := printf "config.resources[%d].kind" $i -}}
{{- $kind := include "informerd.rbac.kind" (dict "root" $root "group" $group "kind" $r.kind "field" $field) | fromYaml -}}
{{- $scoped := or (hasKey $r "namespaces") (hasKey $r "namespaceSelector") -}}
{{- if and (not $kind.namespaced) $scoped -}}
{{- fail (printf "config.resources[%d]: %s is cluster-scoped: remove namespaces and namespaceSelector" $i $r.kind) -}}
{{- end -}}
{{- if hasKey $r "namespaceSelector" -}}
{{- include "informerd.rbac.grant" (dict "rules" $cluster "group" $group "plural" $kind.plural) -}}
{{- include "informerd.rbac.grant" (dict "rules" $cluster "group" "" "plural" "namespaces") -}}
{{- else if $r.namespaces -}}
{{- range $ns := $r.namespaces -}}
{{- $rules := get $namespaced $ns | default dict -}}
{{- include "informerd.rbac.grant" (dict "rules" $rules "group" $group "plural" $kind.plural) -}}
{{- $_ := set $namespaced $ns $rules -}}
{{- end -}}
{{- else -}}
{{- include "informerd.rbac.grant" (dict "rules" $cluster "group" $group "plural" $kind.plural) -}}
{{- end -}}
{{- end -}}
{{- with $config.onDemand -}}
{{- $od := . -}}
{{- range $i, $allow := $od.allow -}}
{{- $plurals := list -}}
{{- if kindIs "slice" $allow.kinds -}}
{{- range $k, $name := $allow.kinds -}}
{{- $field := printf "config.onDemand.allow[%d].kinds[%d]" $i $k -}}
{{- $plurals = append $plurals (include "informerd.rbac.kind" (dict "root" $root "group" $allow.group "kind" $name "field" $field) | fromYaml) -}}
{{- end -}}
{{- else -}}
{{- $plurals = list (dict "plural" "*" "namespaced" true) -}}
{{- end -}}
{{- range $kind := $plurals -}}
{{- if and (kindIs "slice" $od.namespaces) $kind.namespaced -}}
{{- range $ns := $od.namespaces -}}
{{- $rules := get $namespaced $ns | default dict -}}
{{- include "informerd.rbac.grant" (dict "rules" $rules "group" $allow.group "plural" $kind.plural) -}}
{{- $_ := set $namespaced $ns $rules -}}
{{- end -}}
{{- else -}}
{{- include "informerd.rbac.grant" (dict "rules" $cluster "group" $allow.group "plural" $kind.plural) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $auth := $config.server.authorization -}}
{{- $reviews := or (eq (toString $auth) "kubernetes") (and (kindIs "map" $auth) (eq (toString ($auth.mode | default "kubernetes")) "kubernetes")) -}}
{{- toYaml (dict "cluster" $cluster "namespaces" $namespaced "reviews" $reviews) -}}
{{- end -}}

{{- /* The list and watch rules of `rules` (API group → plurals), in informerd rbac's order. */ -}}
{{- define "informerd.rbac.policyRules" -}}
{{- range $group, $plurals := . }}
- apiGroups: [{{ $group | quote }}]
  resources: {{ keys $plurals | sortAlpha | toJson }}
  verbs: [list, watch]
{{- end }}
{{- end -}}
