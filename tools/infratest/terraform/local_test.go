package terraform_test

import (
	"path"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// ---------------------------------------------------------------------------
// local: the root make tf-apply-local applies to the emulators

// emulatorGaps are the module arguments the local root may set to cope with
// what DynamoDB Local lacks (README, "make tf-apply-local"), with the value
// it must set them to; nothing else of a table module is turned off.
var emulatorGaps = map[string]bool{
	"point_in_time_recovery_enabled": false, // no UpdateContinuousBackups
	"manage_server_side_encryption":  false, // SSE accepted, never reported
	"deletion_protection_enabled":    false, // throwaway tables, destroyed by the run
}

func TestLocalRootAppliesTheModulesTheStackServes(t *testing.T) {
	m := load(t, "local")

	require.Len(t, m.providers, 1)
	p := m.providers[0]
	endpoints := nestedBlock(t, p.Body, "endpoints").Body.Attributes
	var services []string
	for name := range endpoints {
		services = append(services, name)
	}
	sort.Strings(services)
	require.Equal(t, []string{"dynamodb", "sqs"}, services, "the local stack serves SQS and DynamoDB only")
	require.Equal(t, "var.sqs_endpoint", m.text(endpoints["sqs"].Expr))
	require.Equal(t, "var.dynamodb_endpoint", m.text(endpoints["dynamodb"].Expr))
	for _, skip := range []string{"skip_credentials_validation", "skip_metadata_api_check", "skip_requesting_account_id"} {
		require.True(t, literal(t, attr(t, p.Body, skip).Expr).True(), skip)
	}

	bySource := map[string]int{}
	for name, call := range m.calls {
		source := path.Base(literal(t, attr(t, call.Body, "source").Expr).AsString())
		bySource[source]++
		switch source {
		case "queue":
			// The DLQ, its redrive policies and the queue policies are applied.
			for _, arg := range []string{"create_dlq", "deny_insecure_transport", "fifo_queue"} {
				require.NotContains(t, call.Body.Attributes, arg, "%s: the module's default is what is applied", name)
			}
		case "dedup-table", "outbox-table":
			require.NotContains(t, call.Body.Attributes, "tags", "%s: DynamoDB Local has no tagging API", name)
			for arg, want := range emulatorGaps {
				require.Contains(t, call.Body.Attributes, arg, "%s: DynamoDB Local needs %s", name, arg)
				require.Equal(t, want, literal(t, call.Body.Attributes[arg].Expr).True(), "%s: %s", name, arg)
			}
			for arg := range call.Body.Attributes {
				switch arg {
				case "source", "name", "create_ledger_table", "ledger_table_name":
				default:
					_, gap := emulatorGaps[arg]
					require.True(t, gap, "%s: %s is not one of the emulator's gaps", name, arg)
				}
			}
		default:
			t.Fatalf("%s: module %s calls a service the local stack does not serve", name, source)
		}
	}
	require.Equal(t, map[string]int{"queue": 2, "dedup-table": 2, "outbox-table": 1}, bySource)
	require.Empty(t, m.resources, "the local root applies the modules only")
}
