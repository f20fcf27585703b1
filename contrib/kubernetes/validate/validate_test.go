package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

var manifests = []string{"../nettune-monitor.yaml", "../nettune-tune.yaml"}

func decodeFile(t *testing.T, file string) []Object {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	objects, errs := Decode(file, data)
	for _, o := range objects {
		errs = append(errs, Check(o)...)
	}
	for _, e := range errs {
		t.Error(e)
	}
	return objects
}

func daemonSet(t *testing.T, file string) *appsv1.DaemonSet {
	t.Helper()
	for _, o := range decodeFile(t, file) {
		if ds, ok := o.Value.(*appsv1.DaemonSet); ok {
			return ds
		}
	}
	t.Fatalf("%s: no DaemonSet", file)
	return nil
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// decodeText runs the validator on a manifest given as text.
func decodeText(text string) []error {
	objects, errs := Decode("test.yaml", []byte(text))
	for _, o := range objects {
		errs = append(errs, Check(o)...)
	}
	return errs
}

func TestTheManifestsDecodeStrictly(t *testing.T) {
	for _, file := range manifests {
		if n := len(decodeFile(t, file)); n != 2 {
			t.Errorf("%s: %d objects, want a Namespace and a DaemonSet", file, n)
		}
	}
}

// What the validator is for: each mistake below is one the API server
// would refuse, and one a YAML linter lets through.
func TestItCatchesWhatTheAPIServerWouldRefuse(t *testing.T) {
	good, err := os.ReadFile("../nettune-monitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(good)
	cases := []struct {
		what, old, new, want string
	}{
		{"a misspelt field", "      hostNetwork: true", "      hostNetwrok: true", `unknown field "spec.template.spec.hostNetwrok"`},
		{"a field at the wrong depth", "\n            readOnlyRootFilesystem: true", "\n            readOnlyRootFilesystem: true\n            hostPID: true", `unknown field "spec.template.spec.containers[0].securityContext.hostPID"`},
		{"a value of the wrong type", "      hostPID: true", `      hostPID: "yes"`, "cannot unmarshal string into Go struct field PodSpec.spec.template.spec.hostPID of type bool"},
		{"a number where a list is", `            - name: metrics
              containerPort: 10056`, `            - name: metrics
              containerPort: "ten thousand"`, "containerPort of type int32"},
		{"a key given twice", "      hostPID: true", "      hostPID: true\n      hostPID: false", `key "hostPID" already set in map`},
		{"an unknown kind", "kind: DaemonSet", "kind: DaemonSett", `kind "DaemonSett" is not a type this validator knows`},
		{"a mount of no volume", "          securityContext:\n            runAsUser: 65534", "          volumeMounts:\n            - name: state\n              mountPath: /var/lib/nettune\n          securityContext:\n            runAsUser: 65534", `mounts volume "state", which the pod does not declare`},
		{"a selector the template does not match", "      labels:\n        app.kubernetes.io/name: nettune\n    spec:", "      labels:\n        app.kubernetes.io/name: other\n    spec:", "does not match the template's labels"},
	}
	for _, c := range cases {
		if !strings.Contains(text, c.old) {
			t.Fatalf("%s: the manifest no longer holds %q", c.what, c.old)
		}
		bad := strings.Replace(text, c.old, c.new, 1)
		errs := decodeText(bad)
		if len(errs) == 0 {
			t.Errorf("%s: not caught", c.what)
			continue
		}
		found := false
		for _, e := range errs {
			if strings.Contains(e.Error(), c.want) {
				found = true
			}
			if !strings.Contains(e.Error(), "test.yaml: document 2") {
				t.Errorf("%s: the error does not say where: %v", c.what, e)
			}
		}
		if !found {
			t.Errorf("%s: want %q in %v", c.what, c.want, errs)
		}
	}
	if errs := decodeText(text); len(errs) != 0 {
		t.Errorf("the unchanged manifest: %v", errs)
	}
}

// The exporter runs as nobody with no capability and nothing of the
// node's mounted, in both DaemonSets, and the two are the same container.
func TestTheMonitorContainerHasNoPrivilege(t *testing.T) {
	var monitors []corev1.Container
	for _, file := range manifests {
		ds := daemonSet(t, file)
		spec := ds.Spec.Template.Spec
		if !spec.HostNetwork || !spec.HostPID {
			t.Errorf("%s: hostNetwork %v hostPID %v, want both", file, spec.HostNetwork, spec.HostPID)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: the pod needs no API token", file)
		}
		m := container(t, spec.Containers, "monitor")
		sc := m.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("%s: monitor must run as a user other than root", file)
		}
		if sc == nil || sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s: monitor must drop every capability and add none", file)
		}
		if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: monitor must not be privileged nor gain privileges", file)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: monitor's root filesystem must be read-only", file)
		}
		if len(m.VolumeMounts) != 0 {
			t.Errorf("%s: monitor mounts %v; it reads its own /proc and /sys", file, m.VolumeMounts)
		}
		if len(m.Args) < 2 || m.Args[0] != "monitor" || m.Args[1] != "--prometheus" {
			t.Errorf("%s: monitor runs %v", file, m.Args)
		}
		monitors = append(monitors, m)
	}
	if !reflect.DeepEqual(monitors[0], monitors[1]) {
		t.Errorf("the monitor container differs between the two DaemonSets")
	}
}

// The tuning DaemonSet: a guarded apply at the start, the rollback on termination,
// both on the node's state directory.
func TestTheTuningDaemonSetAppliesAndRollsBack(t *testing.T) {
	ds := daemonSet(t, "../nettune-tune.yaml")
	spec := ds.Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		t.Fatalf("want one init container, got %d", len(spec.InitContainers))
	}
	apply := spec.InitContainers[0]
	args := strings.Join(apply.Args, " ")
	if !regexp.MustCompile(`^apply --profile \S+`).MatchString(args) {
		t.Errorf("the init container runs %q", args)
	}
	// Guarded: a node where the profile hurts undoes it and stops the
	// rollout there.
	if !regexp.MustCompile(`(^| )--guard \S+`).MatchString(args) {
		t.Errorf("the init container applies without --guard: %q", args)
	}
	rollback := container(t, spec.Containers, "rollback")
	hook := rollback.Lifecycle
	if hook == nil || hook.PreStop == nil || hook.PreStop.Exec == nil ||
		!reflect.DeepEqual(hook.PreStop.Exec.Command, []string{"/usr/bin/nettune", "rollback"}) {
		t.Errorf("the rollback container's preStop hook: %+v", hook)
	}
	var state *corev1.Volume
	for i, v := range spec.Volumes {
		if v.Name == "state" {
			state = &spec.Volumes[i]
		}
	}
	if state == nil || state.HostPath == nil || state.HostPath.Path != "/var/lib/nettune" {
		t.Fatalf("the state volume must be the node's /var/lib/nettune: %+v", state)
	}
	for _, c := range []corev1.Container{apply, rollback} {
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "state" ||
			c.VolumeMounts[0].MountPath != "/var/lib/nettune" || c.VolumeMounts[0].ReadOnly {
			t.Errorf("%s must mount the state volume read-write at nettune's default state directory: %+v", c.Name, c.VolumeMounts)
		}
		sc := c.SecurityContext
		if sc == nil || sc.Privileged == nil || !*sc.Privileged || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
			t.Errorf("%s writes /proc/sys, /proc/irq and /sys: privileged, as root", c.Name)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: the root filesystem must be read-only", c.Name)
		}
	}
}

// The image the manifests name is the one build-image tags.
func TestTheImageIsTheCrateVersion(t *testing.T) {
	cargo, err := os.ReadFile(filepath.Join("..", "..", "..", "Cargo.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version = "([^"]+)"`).FindSubmatch(cargo)
	if m == nil {
		t.Fatal("no version in Cargo.toml")
	}
	want := "localhost/nettune:" + string(m[1])
	for _, file := range manifests {
		spec := daemonSet(t, file).Spec.Template.Spec
		for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			if c.Image != want {
				t.Errorf("%s: container %s runs %s, want %s", file, c.Name, c.Image, want)
			}
		}
	}
}

// The image's entry point (contrib/kubernetes/Containerfile).
const entryPoint = "/usr/bin/nettune"

// reference is a $(VAR) reference in a container's args, as the kubelet
// expands it.
var reference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces the $(VAR) references of args with the container's
// environment as the kubelet would fill it in on a node: a value as
// written, a field of the pod's status as an address of this machine.
func expand(c corev1.Container, args []string) []string {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && strings.HasPrefix(e.ValueFrom.FieldRef.FieldPath, "status.") &&
			strings.HasSuffix(e.ValueFrom.FieldRef.FieldPath, "IP"):
			env[e.Name] = "127.0.0.1"
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = reference.ReplaceAllStringFunc(a, func(ref string) string {
			if v, ok := env[reference.FindStringSubmatch(ref)[1]]; ok {
				return v
			}
			return ref
		})
	}
	return out
}

// Every command the manifests run, each container's arguments after the
// image's entry point and each exec hook, is one that the nettune built
// from this source accepts: its arguments are parsed with --help after
// them, which checks each option and value before it and changes nothing.
// An option this nettune does not have (say, one of a later release), a
// misspelt one or a value it refuses fails here, where a cluster would
// only show a pod that never starts. NETTUNE_BIN names the binary
// (scripts/test-contrib gives the image's).
func TestEveryCommandIsOneThisNettuneAccepts(t *testing.T) {
	bin := os.Getenv("NETTUNE_BIN")
	if bin == "" {
		t.Skip("NETTUNE_BIN is not set: the nettune binary to parse the manifests' commands (scripts/test-contrib sets it)")
	}
	for _, file := range manifests {
		spec := daemonSet(t, file).Spec.Template.Spec
		for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			commands := map[string][]string{}
			if len(c.Command) > 0 && c.Command[0] != entryPoint {
				t.Errorf("%s: container %s runs %q, not the image's %s", file, c.Name, c.Command[0], entryPoint)
				continue
			}
			args := append([]string(nil), c.Command...)
			if len(args) > 0 {
				args = args[1:]
			}
			commands["its arguments"] = append(args, c.Args...)
			if c.Lifecycle != nil {
				for name, h := range map[string]*corev1.LifecycleHandler{"postStart": c.Lifecycle.PostStart, "preStop": c.Lifecycle.PreStop} {
					if h == nil || h.Exec == nil {
						continue
					}
					if len(h.Exec.Command) == 0 || h.Exec.Command[0] != entryPoint {
						t.Errorf("%s: container %s's %s hook runs %q: the image has nothing but %s", file, c.Name, name, h.Exec.Command, entryPoint)
						continue
					}
					commands["its "+name+" hook"] = h.Exec.Command[1:]
				}
			}
			for what, args := range commands {
				if len(args) == 0 {
					t.Errorf("%s: container %s: %s are empty (nettune without a command only prints its help)", file, c.Name, what)
					continue
				}
				args = append(expand(c, args), "--help")
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
				cancel()
				if err != nil {
					t.Errorf("%s: container %s, %s: `nettune %s` is refused by %s (%v): %s",
						file, c.Name, what, strings.Join(args, " "), bin, err, strings.TrimSpace(string(out)))
				}
			}
		}
	}
}
