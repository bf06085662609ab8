package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/exactlyonce/exactly/exactlytest"
	"github.com/exactlyonce/exactly/idempotency"
)

// table stands in for DynamoDB in the examples: the test kit's in-memory
// DynamoDB with a "dedup" table (keyed by pk, TTL on expires_at) and an
// "orders" table. In production pass exactly.NewDynamoDBClient(cfg) and the
// dedup table that `worker setup` or the dedup-table Terraform module
// creates.
func table() *exactlytest.DynamoDB {
	ctx := context.Background()
	db := exactlytest.NewEmptyDynamoDB()
	for _, name := range []string{"dedup", "orders"} {
		if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			BillingMode:          types.BillingModePayPerRequest,
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		}); err != nil {
			panic(err)
		}
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("dedup"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	}); err != nil {
		panic(err)
	}
	return db
}

type Payment struct {
	Order  string `json:"order"`
	Amount int    `json:"amount_cents"`
}

type Receipt struct {
	Charge string `json:"charge"`
}

func ExampleWrap() {
	ledger, err := idempotency.New(idempotency.Config{DynamoDB: table(), Table: "dedup"})
	if err != nil {
		panic(err)
	}
	charges := 0
	pay := idempotency.Wrap(ledger, "pay", func(ctx context.Context, p Payment) (Receipt, error) {
		charges++ // the card network is called here, with idempotency.Key(ctx)
		return Receipt{Charge: fmt.Sprintf("ch_%d", charges)}, nil
	}, idempotency.KeyPointers("/order"))

	ctx := context.Background()
	r1, _ := pay(ctx, Payment{Order: "o-1", Amount: 250})
	r2, _ := pay(ctx, Payment{Order: "o-1", Amount: 250}) // a retry: replayed
	_, err = pay(ctx, Payment{Order: "o-1", Amount: 999}) // the key reused for another payment
	fmt.Println(r1.Charge, r2.Charge, charges)
	fmt.Println(errors.Is(err, idempotency.ErrPayloadMismatch))
	_, err = pay(ctx, Payment{Amount: 100}) // no order, so no key: not run
	fmt.Println(errors.Is(err, idempotency.ErrKeyMissing), charges)
	// Output:
	// ch_1 ch_1 1
	// true
	// true 1
}

// ExampleAllowMissingKey: an input without its key runs without
// idempotency (every time, with a warning logged) instead of failing.
func ExampleAllowMissingKey() {
	ledger, err := idempotency.New(idempotency.Config{DynamoDB: table(), Table: "dedup"})
	if err != nil {
		panic(err)
	}
	runs := 0
	audit := idempotency.Wrap(ledger, "audit", func(ctx context.Context, p Payment) (int, error) {
		runs++
		return runs, nil
	}, idempotency.KeyPointers("/order"), idempotency.AllowMissingKey())
	for range 2 {
		_, _ = audit(context.Background(), Payment{Amount: 100})
	}
	fmt.Println(runs)
	// Output: 2
}

func ExampleMiddleware() {
	ledger, err := idempotency.New(idempotency.Config{DynamoDB: table(), Table: "dedup"})
	if err != nil {
		panic(err)
	}
	created := 0
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		created++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d", created)
	})
	h := idempotency.Middleware(ledger, idempotency.MiddlewareConfig{Required: true})(api)

	for _, body := range []string{`{"sku":"a"}`, `{"sku":"a"}`, `{"sku":"b"}`} {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("Idempotent-Replayed"), strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 201  order 1
	// 201 true order 1
	// 422  {"type":"urn:exactly:idempotency:key-reused","title":"Unprocessable Entity","status":422,"detail":"this Idempotency-Key was used for a different request"}
}

// ExampleWrapTx: a function whose effect is DynamoDB writes returns them;
// they commit with the record, once, whatever is retried.
func ExampleWrapTx() {
	db := table()
	ledger, err := idempotency.New(idempotency.Config{DynamoDB: db, Table: "dedup"})
	if err != nil {
		panic(err)
	}
	deposit := idempotency.WrapTx(ledger, "deposit", func(ctx context.Context, p Payment) (string, []types.TransactWriteItem, error) {
		return "deposited", []types.TransactWriteItem{{Update: &types.Update{
			TableName:                 aws.String("orders"),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "total"}},
			UpdateExpression:          aws.String("ADD amount :a"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberN{Value: fmt.Sprint(p.Amount)}},
		}}}, nil
	}, idempotency.KeyPointers("/order"))
	for range 3 { // a retry storm
		_, _ = deposit(context.Background(), Payment{Order: "o-1", Amount: 250})
	}
	out, _ := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("orders"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "total"}},
	})
	fmt.Println(out.Item["amount"].(*types.AttributeValueMemberN).Value)
	// Output: 250
}
