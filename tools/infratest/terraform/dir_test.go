package terraform_test

import (
	"fmt"
	"os"
	"testing"
)

// The tests read infra/terraform by paths relative to it (modules/*,
// ../../examples/custom-effect/terraform, ...): they run from there.
const terraformDir = "../../../infra/terraform"

func TestMain(m *testing.M) {
	if err := os.Chdir(terraformDir); err != nil {
		fmt.Fprintf(os.Stderr, "cannot enter %s: %v\n", terraformDir, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
