// Package exactly_test checks the build artefacts that no test can build
// here: there is no Docker engine, so the Dockerfile is parsed and its
// promises are checked statically (multi-stage, static binary, non-root,
// certificates, entry point, any main package via MAIN), together with
// .dockerignore and the make targets that build worker, dist and image.
package exactly_test

import (
	"archive/zip"
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/cli"
	"github.com/stretchr/testify/require"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
	line int
}

type stage struct {
	from  instruction
	image string
	name  string
	body  []instruction
}

// parseDockerfile reads the subset of the Dockerfile syntax a careful file
// uses: parser directives and comments, backslash continuations (comment
// lines inside them dropped, as Docker does), one instruction per logical line.
func parseDockerfile(t *testing.T, text string) (globalArgs map[string]string, stages []*stage) {
	t.Helper()
	var ins []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		full := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		ins = append(ins, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
	}
	require.NoError(t, sc.Err())
	require.Zero(t, cur.Len(), "the Dockerfile ends inside a continuation")

	globalArgs = map[string]string{}
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			require.NotEmpty(t, f, "line %d: FROM without an image", in.line)
			s := &stage{from: in, image: expand(f[0], globalArgs)}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			} else {
				require.Len(t, f, 1, "line %d: FROM image [AS name]", in.line)
			}
			stages = append(stages, s)
		case len(stages) == 0:
			require.Equal(t, "ARG", in.cmd, "line %d: only ARG may come before the first FROM", in.line)
			k, v, _ := strings.Cut(in.args, "=")
			globalArgs[k] = v
		default:
			s := stages[len(stages)-1]
			s.body = append(s.body, in)
		}
	}
	return globalArgs, stages
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

func expand(s string, args map[string]string) string {
	return argRef.ReplaceAllStringFunc(s, func(ref string) string {
		return args[argRef.FindStringSubmatch(ref)[1]]
	})
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func jsonArray(t *testing.T, in instruction) []string {
	t.Helper()
	var v []string
	require.NoError(t, json.Unmarshal([]byte(in.args), &v), "line %d: %s must use the exec (JSON array) form", in.line, in.cmd)
	return v
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

// TestDockerfile: a multi-stage build whose last stage is an empty base with
// the static binary, CA certificates and a non-root numeric user.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	args, stages := parseDockerfile(t, readFile(t, "Dockerfile"))
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage")
	names := map[string]bool{}
	for _, s := range stages[:len(stages)-1] {
		require.NotEmpty(t, s.name, "line %d: name every build stage", s.from.line)
		names[s.name] = true
	}

	// The build stage: the Go of go.mod, static, trimmed, versioned.
	build := stages[0]
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readFile(t, "go.mod"))
	require.NotNil(t, goVersion)
	require.True(t, strings.HasPrefix(build.image, "golang:"+goVersion[1]), "build image %q: want golang:%s (go.mod)", build.image, goVersion[1])
	require.Contains(t, args, "GO_VERSION")
	var env strings.Builder
	for _, in := range build.all("ENV") {
		env.WriteString(in.args + " ")
	}
	require.Contains(t, strings.Fields(env.String()), "CGO_ENABLED=0", "a static binary")
	var goBuild instruction
	for _, in := range build.all("RUN") {
		if strings.Contains(in.args, "go build") {
			goBuild = in
		}
	}
	require.NotEmpty(t, goBuild.args, "the build stage runs go build")
	for _, want := range []string{"-trimpath", "-o /out/worker", "-X github.com/exactlyonce/exactly/worker.Version=${VERSION}", "GOARCH=$TARGETARCH"} {
		require.Contains(t, goBuild.args, want)
	}
	require.NotContains(t, goBuild.args, "CGO_ENABLED=1")

	// Any main package, the stock worker by default: the build argument MAIN
	// is what go build compiles, always into /out/worker.
	stageArgs := map[string]string{}
	for _, in := range build.all("ARG") {
		k, v, _ := strings.Cut(in.args, "=")
		stageArgs[k] = v
	}
	require.Equal(t, "./cmd/worker", stageArgs["MAIN"], "ARG MAIN in the build stage, ./cmd/worker by default")
	require.True(t, strings.HasSuffix(goBuild.args, `-o /out/worker "${MAIN}"`), "go build compiles ${MAIN}: %s", goBuild.args)
	require.NotContains(t, goBuild.args, "./cmd/worker", "no main package but MAIN")
	require.True(t, strings.HasSuffix(expand(goBuild.args, stageArgs), `-o /out/worker "./cmd/worker"`))

	// The final stage: nothing but what the worker needs, not root.
	final := stages[len(stages)-1]
	require.Contains(t, []string{"scratch"}, final.image, "final base")
	require.Empty(t, final.all("RUN"), "scratch has no shell")
	copies := map[string]bool{}
	for _, in := range final.all("COPY") {
		f := strings.Fields(in.args)
		require.True(t, strings.HasPrefix(f[0], "--from="), "line %d: the final stage copies from a build stage only", in.line)
		require.True(t, names[strings.TrimPrefix(f[0], "--from=")], "line %d: unknown stage %s", in.line, f[0])
		copies[f[len(f)-1]] = true
	}
	require.True(t, copies["/worker"], "the binary")
	require.True(t, copies["/etc/ssl/certs/ca-certificates.crt"], "CA certificates for TLS to AWS")

	users := final.all("USER")
	require.Len(t, users, 1, "the final stage sets its user once")
	uid, gid, _ := strings.Cut(users[0].args, ":")
	for _, id := range []string{uid, gid} {
		n, err := strconv.Atoi(id)
		require.NoError(t, err, "USER %q: numeric uid:gid, so that runAsNonRoot can check it", users[0].args)
		require.NotZero(t, n, "USER %q: not root", users[0].args)
	}

	ep := final.all("ENTRYPOINT")
	require.Len(t, ep, 1)
	require.Equal(t, []string{"/worker"}, jsonArray(t, ep[0]))
	cmd := final.all("CMD")
	require.Len(t, cmd, 1)
	require.Equal(t, []string{"run"}, jsonArray(t, cmd[0]))
	expose := final.all("EXPOSE")
	require.Len(t, expose, 1)
	require.Equal(t, strings.TrimPrefix(cli.DefaultMetricsAddr, ":"), expose[0].args, "the metrics port")
}

func TestDockerfileParser(t *testing.T) {
	t.Parallel()
	args, stages := parseDockerfile(t, "# syntax=docker/dockerfile:1\nARG V=1.2\nFROM --platform=$BUILDPLATFORM img:${V} AS b\nRUN a \\\n# dropped\n  b\nFROM scratch\nUSER 1:1\n")
	require.Equal(t, map[string]string{"V": "1.2"}, args)
	require.Len(t, stages, 2)
	require.Equal(t, "img:1.2", stages[0].image)
	require.Equal(t, "b", stages[0].name)
	require.Equal(t, "a  b", stages[0].body[0].args)
	require.Equal(t, 4, stages[0].body[0].line)
	require.Equal(t, "1:1", stages[1].all("USER")[0].args)
}

// TestDockerignore: the context keeps the sources and drops what is big or
// secret-prone.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	var patterns []string
	for _, l := range strings.Split(readFile(t, ".dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, want := range []string{".git", ".stack", ".tools", "bin", "dist", "**/node_modules", "**/.terraform"} {
		require.Contains(t, patterns, want)
	}
	for _, p := range patterns {
		require.False(t, strings.HasPrefix(p, "!"), "no exceptions: %s", p)
		for _, needed := range []string{"go.mod", "go.sum", "cmd", "worker", "internal", "effect", "*", "**", "*.go"} {
			require.NotEqual(t, needed, p, "the build needs %s", needed)
		}
	}
}

// TestBuildMakefile: make dist builds the four artefacts the README and the
// Terraform modules name, static and versioned.
func TestBuildMakefile(t *testing.T) {
	t.Parallel()
	mk := readFile(t, "mk/build.mk")
	for _, want := range []string{
		"DIST_ARCHES := amd64 arm64",
		"$(DIST)/worker-linux-$(a)",
		"$(DIST)/worker-lambda-$(a).zip",
		"CGO_ENABLED=0 GOOS=linux GOARCH=$*",
		"-trimpath",
		"-X github.com/exactlyonce/exactly/worker.Version=$(VERSION)",
		"go run ./scripts/lambdazip -o $@ -name bootstrap $<",
	} {
		if strings.HasPrefix(want, "go run") {
			want = strings.Replace(want, "go run", "$(GO) run", 1)
		}
		require.Contains(t, mk, want)
	}
	require.Regexp(t, `(?m)^dist: .*## `, mk, "dist documents itself for make help")
}

// makeDryRun prints the commands make would run, running none.
func makeDryRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("make", append([]string{"-s", "-n"}, args...)...).CombinedOutput()
	require.NoError(t, err, "make %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestMakeBuildsAnyMain: make worker, dist and image build the main package
// MAIN names the way they build the stock worker (./cmd/worker by default).
// There is no Docker engine here, so image is checked from make's dry run.
func TestMakeBuildsAnyMain(t *testing.T) {
	t.Parallel()
	const custom = "./examples/custom-effect"
	goBuilds := func(out string) []string {
		var lines []string
		for _, l := range strings.Split(strings.ReplaceAll(out, "\\\n", " "), "\n") {
			if strings.Contains(l, "go build ") || strings.Contains(l, "docker build ") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	for name, target := range map[string][]string{
		"worker": {"worker"},
		"dist":   {"-f", "mk/build.mk", "dist", "DIST=" + t.TempDir()},
		"image":  {"image"},
	} {
		stock := goBuilds(makeDryRun(t, target...))
		mine := goBuilds(makeDryRun(t, append(target, "MAIN="+custom)...))
		require.NotEmpty(t, stock, "make %s builds nothing", name)
		require.Len(t, mine, len(stock), name)
		for i := range stock {
			require.Contains(t, stock[i], "./cmd/worker", "make %s: the stock worker by default", name)
			require.Contains(t, mine[i], custom, "make %s MAIN=%s", name, custom)
			require.NotContains(t, mine[i], "./cmd/worker", "make %s MAIN=%s", name, custom)
			// The same command otherwise: same flags, same output.
			require.Equal(t, stock[i], strings.ReplaceAll(strings.ReplaceAll(mine[i], custom, "./cmd/worker"), "exactly-custom-effect:", "exactly-worker:"), name)
		}
	}
	image := makeDryRun(t, "image", "MAIN="+custom, "VERSION=v9")
	require.Contains(t, image, "docker build --platform linux/arm64")
	require.Contains(t, image, "--build-arg MAIN="+custom)
	require.Contains(t, image, "--build-arg VERSION=v9")
	require.Contains(t, image, "-t exactly-custom-effect:v9 .")
	require.Contains(t, makeDryRun(t, "image", "VERSION=v9"), "-t exactly-worker:v9 .")
	require.Regexp(t, `(?m)^image: .*## `, readFile(t, "mk/build.mk"), "image documents itself for make help")
}

// TestMakeDistBuildsACustomMain builds the Lambda zip of
// examples/custom-effect with make dist's recipe and runs its bootstrap:
// it knows the email effect, which the stock worker does not.
func TestMakeDistBuildsACustomMain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("the zip's bootstrap runs on linux/amd64 or linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	t.Parallel()
	dir := t.TempDir()
	zipPath := filepath.Join(dir, "worker-lambda-"+runtime.GOARCH+".zip")
	out, err := exec.Command("make", "-s", "-f", "mk/build.mk", "DIST="+dir, "MAIN=./examples/custom-effect", "VERSION=custom-test", zipPath).CombinedOutput()
	require.NoError(t, err, "make: %s", out)

	zr, err := zip.OpenReader(zipPath)
	require.NoError(t, err)
	defer zr.Close()
	require.Len(t, zr.File, 1)
	require.Equal(t, "bootstrap", zr.File[0].Name)
	rc, err := zr.File[0].Open()
	require.NoError(t, err)
	bootstrap := filepath.Join(dir, "bootstrap")
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.NoError(t, os.WriteFile(bootstrap, b, 0o755))

	cmd := exec.Command(bootstrap, "run", "--help")
	cmd.Env = []string{}
	help, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", help)
	require.Contains(t, string(help), "email|http|ledger|noop", "the custom binary registers email")
	version, err := exec.Command(bootstrap, "version").CombinedOutput()
	require.NoError(t, err, "%s", version)
	require.Contains(t, string(version), "custom-test")
}
