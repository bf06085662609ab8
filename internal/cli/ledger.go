package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/exactlyonce/exactly/internal/config"
	"github.com/exactlyonce/exactly/internal/dedup"
)

// Balance is one account of the ledger demo effect.
type Balance struct {
	Account      string
	BalanceCents int64
	Applied      int64
	LastSeq      int64
}

// ReadBalances scans the ledger table's account items.
func ReadBalances(ctx context.Context, db *dynamodb.Client, table string) ([]Balance, error) {
	var out []Balance
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                 &table,
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("begins_with(pk, :acct)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":acct": &ddbtypes.AttributeValueMemberS{Value: "acct#"}},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("cannot scan ledger table %s: %w", table, err)
		}
		for _, it := range page.Items {
			b := Balance{Account: strings.TrimPrefix(dedup.GetS(it, "pk"), "acct#")}
			b.BalanceCents = dedup.GetN(it, "balance_cents")
			b.Applied = dedup.GetN(it, "applied")
			b.LastSeq = dedup.GetN(it, "last_seq")
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out, nil
}

func ledgerCommand(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) error {
	var table string
	fs := config.NewSet("worker ledger", stderr, lookup)
	fs.String(&table, "ledger-table", "WORKER_LEDGER_TABLE", DefaultLedgerTable, "ledger table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := newClients(ctx, lookup, nil)
	if err != nil {
		return err
	}
	defer cl.close()
	bs, err := ReadBalances(ctx, cl.dynamo, table)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "account\tbalance\tapplied\tlast seq\t")
	for _, b := range bs {
		fmt.Fprintf(tw, "%s\t%d.%02d\t%d\t%d\t\n", b.Account, b.BalanceCents/100, abs(b.BalanceCents%100), b.Applied, b.LastSeq)
	}
	return tw.Flush()
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
