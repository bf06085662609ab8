package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const fakeRegistry = `package sdkv2

import (
	"context"
	"slices"

	"github.com/hashicorp/terraform-provider-aws/internal/conns"
	"github.com/hashicorp/terraform-provider-aws/internal/service/iam"
	"github.com/hashicorp/terraform-provider-aws/internal/service/logs"
	"github.com/hashicorp/terraform-provider-aws/internal/service/meta"
	"github.com/hashicorp/terraform-provider-aws/internal/service/quicksight"
	"github.com/hashicorp/terraform-provider-aws/internal/service/sqs"
)

func servicePackages(ctx context.Context) []conns.ServicePackage {
	v := []conns.ServicePackage{
		iam.ServicePackage(ctx),
		logs.ServicePackage(ctx),
		meta.ServicePackage(ctx),
		quicksight.ServicePackage(ctx),
		sqs.ServicePackage(ctx),
	}

	return slices.Clone(v)
}
`

// fakeProvider lays out the files tfprovidermin reads of the provider's
// source: the registry and each service's generated registrations.
func fakeProvider(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	write(registryFile, fakeRegistry)
	for pkg, types := range map[string][]string{
		"iam":        {"aws_iam_role", "aws_iam_policy_document"},
		"logs":       {"aws_cloudwatch_log_group"},
		"meta":       {"aws_region"},
		"quicksight": {"aws_quicksight_user"},
		"sqs":        {"aws_sqs_queue"},
	} {
		var text string
		for _, ty := range types {
			text += "\t\t{\n\t\t\tTypeName: \"" + ty + "\",\n\t\t},\n"
		}
		write("internal/service/"+pkg+"/service_package_gen.go", "package "+pkg+"\n\nvar _ = `\n"+text+"`\n")
	}
	return dir
}

func tfDir(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "modules", "q"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "modules", "q", "main.tf"), []byte(text), 0o644))
	return dir
}

func TestCutKeepsThePackagesTheModulesUse(t *testing.T) {
	provider := fakeProvider(t)
	dirs := []string{tfDir(t, `
resource "aws_sqs_queue" "q" {}
data "aws_iam_policy_document" "p" {}
  resource "aws_cloudwatch_log_group" "l" {}
`)}
	listed, err := run(provider, dirs, false)
	require.NoError(t, err)
	untouched, err := os.ReadFile(filepath.Join(provider, registryFile))
	require.NoError(t, err)
	require.Equal(t, fakeRegistry, string(untouched), "-n writes nothing")
	kept, err := run(provider, dirs, true)
	require.NoError(t, err)
	require.Equal(t, []string{"iam", "logs", "meta", "sqs"}, kept, "meta is always kept; quicksight is not used")
	require.Equal(t, listed, kept, "-n lists what the cut keeps")
	cut, err := os.ReadFile(filepath.Join(provider, registryFile))
	require.NoError(t, err)
	require.NotContains(t, string(cut), "quicksight")
	for _, pkg := range kept {
		require.Contains(t, string(cut), `internal/service/`+pkg+`"`)
		require.Contains(t, string(cut), pkg+".ServicePackage(ctx),")
	}
	require.Contains(t, string(cut), "return slices.Clone(v)", "the rest of the file is kept")

	again, err := run(provider, []string{tfDir(t, `resource "aws_sqs_queue" "q" {}`)}, true)
	require.NoError(t, err, "a cut registry can be cut again")
	require.Equal(t, []string{"meta", "sqs"}, again)
}

func TestATypeNoPackageRegistersFails(t *testing.T) {
	_, err := run(fakeProvider(t), []string{tfDir(t, `resource "aws_sqs_queu" "q" {}`)}, false)
	require.ErrorContains(t, err, "registers aws_sqs_queu")
}

func TestARegistryOfAnotherShapeFails(t *testing.T) {
	provider := fakeProvider(t)
	require.NoError(t, os.WriteFile(filepath.Join(provider, registryFile), []byte("package sdkv2\n"), 0o644))
	_, err := run(provider, []string{tfDir(t, `resource "aws_sqs_queue" "q" {}`)}, true)
	require.ErrorContains(t, err, "shape changed")
}

// TestTheRepositorysModulesNameTypes reads the types this repository's
// Terraform names, the list the cut is made from (whether the pinned
// provider registers each is what make tf-provider-min then checks).
func TestTheRepositorysModulesNameTypes(t *testing.T) {
	types, err := usedTypes([]string{"../../../infra/terraform", "../../../examples/custom-effect/terraform", "../../../localstack/terraform"})
	require.NoError(t, err)
	require.Contains(t, types, "aws_sqs_queue")
	require.Contains(t, types, "aws_dynamodb_table")
	require.Contains(t, types, "aws_lambda_event_source_mapping")
}
