// Command validate decodes Kubernetes manifests strictly against the API
// types of k8s.io/api, as the API server's decoder would before admission,
// with no cluster: a field the type does not have (a misspelt key, a key
// at the wrong depth), a value of the wrong type, a key given twice or a
// kind this program does not know is an error naming the file, the
// document and the field. A few consistency rules the API server also
// enforces are checked as well (a volume mount names a volume of the pod,
// container names are unique, the selector matches the template's
// labels).
//
// What it cannot catch: admission (Pod Security, quotas, webhooks), field
// validation beyond these rules (ranges, formats), whether the image
// exists, and scheduling.
//
//	go run . ../nettune-monitor.yaml ../nettune-tune.yaml
//
// Exit status: 0 when every document decodes and passes, 1 when one does
// not, 2 for bad usage or an unreadable file.
package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Object is one decoded document: where it came from and the typed value.
type Object struct {
	File  string
	Index int // 1-based document number in the file
	Line  int // line of the document's first line
	Kind  string
	Name  string
	Value any
}

func (o Object) where() string {
	return fmt.Sprintf("%s: document %d (line %d, %s %q)", o.File, o.Index, o.Line, o.Kind, o.Name)
}

// kinds maps apiVersion/kind to a new value of its Go type.
var kinds = map[string]func() any{
	"apps/v1/DaemonSet":  func() any { return &appsv1.DaemonSet{} },
	"apps/v1/Deployment": func() any { return &appsv1.Deployment{} },
	"v1/Namespace":       func() any { return &corev1.Namespace{} },
	"v1/ServiceAccount":  func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":       func() any { return &corev1.ConfigMap{} },
	"v1/Service":         func() any { return &corev1.Service{} },
	"v1/Pod":             func() any { return &corev1.Pod{} },
}

type document struct {
	text []byte
	line int
}

// split cuts a YAML stream at its `---` lines; documents holding only
// comments and blank lines are dropped.
func split(data []byte) []document {
	var docs []document
	var cur bytes.Buffer
	start, content := 1, false
	flush := func() {
		if content {
			docs = append(docs, document{text: append([]byte(nil), cur.Bytes()...), line: start})
		}
		cur.Reset()
		content = false
	}
	for i, line := range strings.SplitAfter(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "---" || strings.HasPrefix(trimmed, "--- ") {
			flush()
			start = i + 2
			continue
		}
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			if !content {
				start = i + 1
			}
			content = true
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

// Decode reads every document of a manifest file strictly.
func Decode(file string, data []byte) ([]Object, []error) {
	var objects []Object
	var errs []error
	for i, doc := range split(data) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc.text, &meta); err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d (line %d): not YAML: %v", file, i+1, doc.line, err))
			continue
		}
		key := meta.APIVersion + "/" + meta.Kind
		newValue, ok := kinds[key]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: document %d (line %d): apiVersion %q kind %q is not a type this validator knows (it knows %s)",
				file, i+1, doc.line, meta.APIVersion, meta.Kind, known()))
			continue
		}
		value := newValue()
		if problems := strict(doc.text, value); len(problems) > 0 {
			for _, p := range problems {
				errs = append(errs, fmt.Errorf("%s: document %d (line %d, %s): %s", file, i+1, doc.line, meta.Kind, p))
			}
			continue
		}
		name := ""
		if m, ok := value.(metav1.Object); ok {
			name = m.GetName()
		}
		objects = append(objects, Object{File: file, Index: i + 1, Line: doc.line, Kind: meta.Kind, Name: name, Value: value})
	}
	return objects, errs
}

func known() string {
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// strict decodes one document as the API server's strict decoder does:
// YAML to JSON refusing a key given twice, then JSON into the type,
// naming every field the type does not have by its path
// (`spec.template.spec.hostNetwrok`) and every value of the wrong type.
func strict(text []byte, value any) []string {
	data, err := yaml.YAMLToJSONStrict(text)
	if err != nil {
		return []string{strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")}
	}
	unknown, err := sigsjson.UnmarshalStrict(data, value, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	var problems []string
	if err != nil {
		problems = append(problems, strings.TrimPrefix(err.Error(), "json: "))
	}
	for _, e := range unknown {
		problems = append(problems, strings.TrimPrefix(e.Error(), "json: "))
	}
	return problems
}

// Check applies the consistency rules to one decoded object.
func Check(o Object) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", o.where(), fmt.Sprintf(format, args...)))
	}
	if o.Name == "" {
		fail("metadata.name is empty")
	}
	var spec *corev1.PodSpec
	var selector *metav1.LabelSelector
	var labels map[string]string
	switch v := o.Value.(type) {
	case *appsv1.DaemonSet:
		spec, selector, labels = &v.Spec.Template.Spec, v.Spec.Selector, v.Spec.Template.Labels
	case *appsv1.Deployment:
		spec, selector, labels = &v.Spec.Template.Spec, v.Spec.Selector, v.Spec.Template.Labels
	case *corev1.Pod:
		spec = &v.Spec
	}
	if selector != nil || labels != nil {
		if selector == nil || len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			fail("spec.selector is empty")
		} else {
			for k, want := range selector.MatchLabels {
				if labels[k] != want {
					fail("spec.selector.matchLabels %s=%s does not match the template's labels", k, want)
				}
			}
		}
	}
	if spec == nil {
		return errs
	}
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		if volumes[v.Name] {
			fail("volume %q is declared twice", v.Name)
		}
		volumes[v.Name] = true
	}
	names := map[string]bool{}
	all := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	if len(spec.Containers) == 0 {
		fail("the pod has no container")
	}
	for _, c := range all {
		if c.Name == "" {
			fail("a container has no name")
		}
		if names[c.Name] {
			fail("container name %q is used twice", c.Name)
		}
		names[c.Name] = true
		if c.Image == "" {
			fail("container %q has no image", c.Name)
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				fail("container %q mounts volume %q, which the pod does not declare", c.Name, m.Name)
			}
		}
	}
	return errs
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: validate MANIFEST.yaml...")
		os.Exit(2)
	}
	status := 0
	for _, file := range os.Args[1:] {
		data, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(os.Stderr, "validate: %v\n", err)
			os.Exit(2)
		}
		objects, errs := Decode(file, data)
		for _, o := range objects {
			errs = append(errs, Check(o)...)
		}
		for _, e := range errs {
			fmt.Fprintf(os.Stderr, "validate: %v\n", e)
			status = 1
		}
		if len(errs) == 0 {
			var what []string
			for _, o := range objects {
				what = append(what, o.Kind+"/"+o.Name)
			}
			fmt.Printf("%s: %d object(s) decode strictly: %s\n", file, len(objects), strings.Join(what, ", "))
		}
	}
	os.Exit(status)
}
