{{- define "prefixroute.name" -}}
{{- if eq .Values.shape "epp" }}{{ .Release.Name }}-epp{{ else }}{{ .Release.Name }}{{ end }}
{{- end -}}

{{- define "prefixroute.labels" -}}
app.kubernetes.io/name: {{ include "prefixroute.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "prefixroute.selector" -}}
app.kubernetes.io/name: {{ include "prefixroute.name" . }}
{{- end -}}
