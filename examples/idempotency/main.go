// Command idempotency is an HTTP API made idempotent with the ledger, outside
// any queue: POST /payments charges once per Idempotency-Key, and the charge
// function is exactly-once per order whoever calls it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/exactlyonce/exactly"

	"github.com/exactlyonce/exactly/idempotency"
)

type Payment struct {
	Order  string `json:"order"`
	Amount int    `json:"amount_cents"`
}

type Receipt struct {
	Charge string `json:"charge"`
}

// newAPI builds the handler on a ledger.
func newAPI(ledger *idempotency.Ledger) http.Handler {
	charge := idempotency.Wrap(ledger, "charge", func(ctx context.Context, p Payment) (Receipt, error) {
		// Call the payment provider here, with idempotency.Key(ctx) as its idempotency key.
		return Receipt{Charge: fmt.Sprintf("ch_%s_%d", p.Order, p.Amount)}, nil
	}, idempotency.KeyPointers("/order"))

	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p Payment
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		receipt, err := charge(r.Context(), p)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(receipt)
	})
	return idempotency.Middleware(ledger, idempotency.MiddlewareConfig{Required: true})(api)
}

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ledger, err := idempotency.New(idempotency.Config{DynamoDB: exactly.NewDynamoDBClient(cfg), Table: "exactly-dedup"})
	if err != nil {
		log.Fatal(err)
	}
	if err := ledger.Check(context.Background()); err != nil {
		log.Fatal(err) // no such table, or no TTL on expires_at
	}
	http.Handle("POST /payments", newAPI(ledger))
	log.Fatal(http.ListenAndServe(":8080", nil))
}
