package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// chart is the Helm chart's directory; helmBin the helm that make tools
// installs (HELM_VERSION in the Makefile).
const (
	chart   = "helm/prefixroute"
	helmBin = "../bin/helm"
)

// inferencePool and httpRoute are the fields of the two CRDs the chart
// renders (inference.networking.k8s.io/v1, gateway.networking.k8s.io/v1),
// decoded strictly: a field not here fails the test.
type inferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		TargetPorts []struct {
			Number int32 `json:"number"`
		} `json:"targetPorts"`
		EndpointPickerRef struct {
			Group string `json:"group,omitempty"`
			Kind  string `json:"kind"`
			Name  string `json:"name"`
			Port  struct {
				Number int32 `json:"number"`
			} `json:"port"`
			FailureMode string `json:"failureMode"`
		} `json:"endpointPickerRef"`
	} `json:"spec"`
}

type httpRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ParentRefs []struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace,omitempty"`
		} `json:"parentRefs"`
		Rules []struct {
			Matches []struct {
				Path struct {
					Type  string `json:"type"`
					Value string `json:"value"`
				} `json:"path"`
			} `json:"matches"`
			BackendRefs []struct {
				Group string `json:"group"`
				Kind  string `json:"kind"`
				Name  string `json:"name"`
			} `json:"backendRefs"`
			Timeouts struct {
				Request string `json:"request"`
			} `json:"timeouts"`
		} `json:"rules"`
	} `json:"spec"`
}

// strictTypes maps apiVersion/kind to the type a rendered object must
// decode into without unknown fields.
var strictTypes = map[string]func() any{
	"apps/v1/Deployment":                           func() any { return &appsv1.Deployment{} },
	"v1/Service":                                   func() any { return &corev1.Service{} },
	"v1/ConfigMap":                                 func() any { return &corev1.ConfigMap{} },
	"v1/PersistentVolumeClaim":                     func() any { return &corev1.PersistentVolumeClaim{} },
	"networking.k8s.io/v1/NetworkPolicy":           func() any { return &networkingv1.NetworkPolicy{} },
	"inference.networking.k8s.io/v1/InferencePool": func() any { return &inferencePool{} },
	"gateway.networking.k8s.io/v1/HTTPRoute":       func() any { return &httpRoute{} },
}

// helm runs bin/helm; a missing binary fails (make tools installs it).
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	if _, err := os.Stat(helmBin); err != nil {
		t.Fatalf("%s: %v: run make tools (installs helm %s)", helmBin, err, "from the Makefile's HELM_VERSION")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(helmBin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return out
}

// TestHelmChart: for each shape's values (ci/*-values.yaml) the chart
// lints and renders; every rendered object decodes strictly into its
// Kubernetes type; the objects pass the consistency check of the shipped
// manifests (probes, Services, GOMEMLIMIT); each shape has the objects it
// promises.
func TestHelmChart(t *testing.T) {
	shapes := map[string][]string{
		"pvc":  {"ConfigMap", "Deployment", "PersistentVolumeClaim", "Service"},
		"nats": {"ConfigMap", "Deployment", "Service"},
		"epp":  {"Deployment", "HTTPRoute", "InferencePool", "NetworkPolicy", "PersistentVolumeClaim", "Service"},
	}
	for shape, want := range shapes {
		t.Run(shape, func(t *testing.T) {
			values := filepath.Join(chart, "ci", shape+"-values.yaml")
			helm(t, "lint", "--strict", chart, "-f", values)
			out := helm(t, "template", "prefixroute", chart, "-f", values)
			objs := decodeObjects(t, "helm template ("+shape+")", out)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.kind())
				key := fmt.Sprintf("%s/%s", str(o.m, "apiVersion"), o.kind())
				mk, ok := strictTypes[key]
				if !ok {
					t.Errorf("%s %s: no strict type for %s", o.kind(), o.name(), key)
					continue
				}
				j, err := sigsyaml.Marshal(o.m)
				if err == nil {
					err = sigsyaml.UnmarshalStrict(j, mk())
				}
				if err != nil {
					t.Errorf("%s %s: %v", o.kind(), o.name(), err)
				}
			}
			if got := strings.Join(slices.Sorted(slices.Values(kinds)), ","); got != strings.Join(want, ",") {
				t.Errorf("rendered %s, want %s", got, strings.Join(want, ","))
			}
			for _, e := range checkConsistency(t, objs) {
				t.Error(e)
			}
		})
	}
}

// TestHelmChartRefusesUnknownShape: a shape other than pvc, nats or epp
// fails to render with a message naming the three.
func TestHelmChartRefusesUnknownShape(t *testing.T) {
	if _, err := os.Stat(helmBin); err != nil {
		t.Fatalf("%s: %v: run make tools", helmBin, err)
	}
	out, err := exec.Command(helmBin, "template", "x", chart, "--set", "shape=single").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `shape "single": want pvc, nats or epp`) {
		t.Fatalf("helm template --set shape=single: err %v, output %s", err, out)
	}
}
